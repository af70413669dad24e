// `cact-run bench`'s tool-call figures: one call end to end (open, retrieval, grammar setup,
// prefill, constrained decode: what a user waits for) on a fixed 4-tool catalogue, cold (the
// whole prompt fed) and warm (the tools prefix restored: in the same process, and from a
// prompt cache file as a new process would, model open included), and the grammar's cost
// against free decoding of as many tokens, all measured in the same repetition.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

struct ToolCallBenchOptions {
  std::string model_path;
  std::string path = "fast";
  uint32_t threads = 1;
  uint32_t reps = 5;
  uint32_t max_tokens = 64;  // the answer's budget
};

struct ToolCallFigures {
  uint32_t threads = 1, prompt_tokens = 0;
  // Per repetition.
  std::vector<double> total_ms, prefill_ms, answer_tokens;
  std::vector<double> warm_ms, warm_prefill_ms;  // the prefix restored in the process
  std::vector<double> file_ms;                  // model opened, prefix loaded from a file
  uint64_t prompt_cache_bytes = 0;
  std::vector<double> constrained_tps;  // decode steps / (forward + mask time)
  std::vector<double> free_tps;         // the same number of steps, no grammar
  std::vector<double> mask_share;       // mask time / forward decode time
};

absl::StatusOr<ToolCallFigures> MeasureToolCalls(const ToolCallBenchOptions& options);

}  // namespace cact
