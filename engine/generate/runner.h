// What `cact-run` does, as a library: load a model, build the prompt (raw ids, text, or the
// Needle chat template), prefill, generate, write logits / hidden states, validate two
// paths, and measure the timings. The CLI only parses flags and prints.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/eval/validate.h"
#include "engine/generate/prefix_reuse.h"
#include "engine/probe_heads.h"
#include "engine/sampler.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"

namespace cact {

// RunRequest::next_without_logits: the choice needs the model's logits.
inline constexpr int32_t kNeedsLogits = -2;

struct RunRequest {
  std::string model_path;
  std::string path = "auto";  // "fast", "ref", "auto"

  // Exactly one prompt source: raw ids, a text prompt, or the chat template (from the tool
  // declarations and a query, or already rendered and tokenized by a library caller).
  std::optional<std::vector<int32_t>> tokens;
  std::optional<std::string> prompt;
  std::optional<std::string> tools_json;  // raw JSON text of the tool declarations
  std::optional<std::string> query, system;
  std::optional<ChatPrompt> chat_prompt;
  // The release of the chat template that renders tools_json/query/system, and a tool
  // call's prompt (engine/toolcall/tool_call_runner.h).
  ChatTemplate chat_template = kDefaultChatTemplate;

  uint32_t max_new_tokens = 0;
  bool ignore_eos = false;  // keep generating past EOS / <|im_end|> (benchmarks, memory checks)
  std::optional<uint32_t> window, sink;  // defaults: header kv_window; tools prefix or 0
  // 0: AutoThreads (forward_paths.h): the fast path uses the CPUs this process may run on,
  // at most the model's KV heads; the FP32 reference one thread.
  int threads = 0;
  SamplerOptions sampling;

  std::string logits_path;  // .npy [T, vocab] of the prompt positions ([1, vocab] if last_only)
  bool last_only = false;
  std::string dump_hidden_dir;  // DIR/hidden.npy: lane mean after each layer [L, T, d]
  bool probes = false;          // compute the probe heads over the fed tokens

  // Library callers that already hold the model (and its tokenizer) pass them here
  // (model_path is then unused).
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  // Library callers running many prompts over the same tools (eval, batches, a prompt cache
  // file) keep their forward and the tools prefix's state here
  // (engine/generate/prefix_reuse.h); results are identical. Needs `model` (the forwards
  // kept refer to it). Not used for validation or for logits of every prompt position.
  PrefixReuse* prefix_reuse = nullptr;
  // When set, picks every generated token from the last logits instead of the sampler (the
  // tool-call grammar: engine/toolcall/tool_call_decoder.h); -1 ends the generation.
  std::function<int32_t(std::span<const float>)> choose_next;
  // With choose_next: the token after the one just chosen when the logits cannot change it
  // (-1 ends the generation), else kNeedsLogits. Such runs of tokens are fed in one forward
  // call instead of a step each: the same tokens, logits and states, fewer weight passes.
  std::function<int32_t()> next_without_logits;

  bool validate = false;  // reference vs `path` (fast by default) on the prompt + decode
  uint32_t validate_steps = 64;
  // Given steps that do not fit after the prompt are refused; the default stops at
  // max_seq_len.
  bool validate_steps_given = false;
  ValidateThresholds thresholds;
};

struct RunTimings {
  // load_ms = open_ms (map + validate + model view) + the forward path's setup.
  double open_ms = 0, load_ms = 0, tokenize_ms = 0, prefill_ms = 0, first_token_ms = 0,
         decode_ms = 0, probes_ms = 0;
  // decode_steps: generated tokens fed to the model; decode_feeds: the forward calls that
  // fed them (fewer when the tool-call grammar leaves runs of tokens no choice).
  uint32_t prompt_tokens = 0, generated_tokens = 0, decode_steps = 0, decode_feeds = 0;
  uint64_t peak_rss_bytes = 0;
  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

struct RunResult {
  std::string path_name;
  uint32_t window = 0, sink = 0;
  int threads = 1;  // of the path that ran (with --validate: of the checked path)
  std::vector<int32_t> prompt_ids, generated_ids;
  int32_t stopped_by = -1;  // the token that ended generation (EOS, <|im_end|>), else -1
  bool prefix_reused = false;  // the tools prefix's state was restored (RunRequest::prefix_reuse)
  bool prefix_from_file = false;  // ... from the prompt cache file
  std::string text;         // decoded generation (empty without a tokenizer-driven run)
  RunTimings timings;
  std::optional<ProbeOutputs> probes;
  std::optional<ValidationReport> validation;
};

// Runs the request. `on_text` receives decoded text as it is generated (complete UTF-8
// only). Errors: InvalidArgument / OutOfRange / NotFound / DataLoss etc. for bad input
// (the CLI exits 2), Unimplemented for a path that is not built.
absl::StatusOr<RunResult> RunModel(const RunRequest& request,
                                   const std::function<void(std::string_view)>& on_text = {});

// One-line human summary of the timings ("load 12.0 ms | tokenize ...").
std::string TimingLine(const RunResult& r);
// The whole result as one JSON object.
std::string ResultJson(const RunResult& r);

}  // namespace cact
