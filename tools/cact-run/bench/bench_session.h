// `cact-run bench`'s start-up and memory figures (load time and peak RSS):
//  - open + validate: CactFile::Open + Model::FromFile, i.e. mapping the file, checking
//    every header field, record and the tokenizer, and building the model view;
//  - fast-path setup: MakeFastForward (norm panels, int8 codebooks, buffers, KV cache);
//  - a session in a fresh `cact-run` process: the caller's prompt ids, then greedy decoding
//    up to `session_tokens` positions; its peak RSS (VmHWM: the mapping, libraries, KV
//    cache and buffers) and the load time it reports itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

struct SessionOptions {
  std::string model_path;
  std::string run_binary;          // the cact-run executable for the fresh-process session
  std::vector<int32_t> prompt;     // the session's prompt ids (cut to session_tokens - 1)
  uint32_t session_tokens = 2048;  // total positions (capped at max_seq_len)
  uint32_t threads = 1;
  uint32_t reps = 5;  // in-process open/setup timings
};

struct SessionFigures {
  std::vector<double> open_ms, setup_ms;  // one per repetition
  uint32_t prompt = 0, session_tokens = 0, threads = 1;
  double session_peak_rss_mb = 0;  // MiB
  double session_load_ms = 0;      // as the fresh process reports it
  double session_decode_tps = 0;
};

absl::StatusOr<SessionFigures> MeasureSession(const SessionOptions& options);

// Runs a shell command and returns its stdout (stderr discarded); an error when it cannot
// start or exits non-zero.
absl::StatusOr<std::string> CaptureStdout(const std::string& cmd);

}  // namespace cact
