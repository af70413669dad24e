// `cact-run bench`: llama-bench-style throughput of the forward paths, side by side.
//
//   cact-run bench MODEL [-p 256] [-n 128] [-d 0,256,1024,2048] [-r 5] [-t 1,2]
//                  [--arms fast,fast-int8,ref] [--kernels avx512vbmi,amx]
//                  [--torch PATH/cact-torch] [--json]
//                  [--json-out FILE] [--svg FILE] [--session N] [--tool-call N]
//
// Tests: ppP (prefill P tokens into an empty context) and tgN @ dD (decode N tokens one at
// a time after D context tokens; the default D list is capped at max_seq_len - N, a given D
// past it is refused). Random token ids, no tokenization or sampling inside the timed region. Within each repetition every test
// runs every arm back to back, so machine noise hits the arms alike; each row reports
// mean +- sample stddev of tokens/s over the repetitions, then ratios between arms.
// Arms: fast (default numerics), fast-int8 (plain int8 activations and codebooks, the
// official engine's numerics), ref (the FP32 reference; tests needing more than
// --ref-max-tokens tokens are skipped, it decodes at ~20 tokens/s on needle2), torch
// (cact-torch's TorchScript export run by libtorch; prefill tests only, its own process).
// --kernels runs each fast arm once per CQ kernel (arms named fast@amx, ...; the kernel is
// switched before each run), so kernels are compared side by side in one run.
// The run also measures this machine's limits: read bandwidth over a buffer the size of the
// model's codes, int8 dot throughput, and prints the model's floor time per decoded
// token and the fraction of it the fast path reaches, and the start-up and memory figures
// of bench_session.h (open + validate, fast-path setup, a fresh process's peak RSS over an
// N-position session), and one tool call end to end with the grammar's cost against free
// decoding (tool_call_bench.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

struct BenchOptions {
  std::string model_path;
  std::vector<uint32_t> prompt = {256};
  uint32_t gen = 128;
  std::vector<uint32_t> depths = {0, 256, 1024, 2048};
  uint32_t reps = 5;
  std::vector<uint32_t> threads = {1, 2};
  std::vector<std::string> arms = {"fast", "fast-int8", "ref"};
  std::vector<std::string> kernels;  // CQ kernels to cross with the fast arms (empty: the active one)
  std::string format = "md";  // md | json
  std::string json_out;       // also write the JSON report here (md runs)
  std::string svg_out;        // also write an SVG plot of decode tokens/s against depth
  std::string torch_binary;   // cact-torch executable (adds the torch arm)
  uint32_t ref_max_tokens = 600;
  int32_t window = -1;  // -1: the header's kv_window
  bool depths_given = false;  // -d given: depths past max_seq_len are refused, else capped
  uint32_t sink = 0;
  double limits_seconds = 0.3;
  uint64_t seed = 1;
  uint32_t session_tokens = 2048;  // fresh-process memory session (0: skip; see bench_session.h)
  std::string run_binary;          // cact-run for that session (default: this executable)
  uint32_t tool_call_tokens = 64;  // answer budget of the tool-call figures (0: skip)
};

// Runs the benchmark; returns the report (markdown or JSON). Progress goes to stderr.
absl::StatusOr<std::string> RunBench(const BenchOptions& options);

// The `cact-run bench` command line (argv[0] is "bench"). Exit codes: 0 ok, 2 bad input.
int BenchMain(int argc, char** argv);

}  // namespace cact
