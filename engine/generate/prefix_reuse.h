// Reuse of a prompt prefix across runs (eval, batches of queries over the same tools, and
// across processes with a prompt cache file): the forwards of earlier runs are kept (one
// per path and options: the pinned sink is the prefix's length), and the state after each
// distinct prefix (the tool declarations) is saved; a later run whose prompt starts with a
// saved prefix restores it and feeds only the rest. The caller keeps the models alive. Results are
// bit-identical to runs without it (engine/forward.h: Save / Restore; a prompt split at the prefix
// equals the whole prompt).
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/forward.h"
#include "engine/generate/prompt_cache.h"
#include "engine/probe_heads.h"

namespace cact {

class PrefixReuse {
 public:
  // At most this many forwards, and prefixes per forward, are kept; the least recently used
  // is dropped.
  static constexpr size_t kMaxForwards = 4, kMaxPrefixes = 8;

  // The forward for `model`, `path` and `options`: a kept one when all three match, else a
  // new one. It becomes the current forward.
  absl::StatusOr<Forward*> ForwardFor(const Model& model, const std::string& path,
                                      const ForwardOptions& options);
  // Also keeps the states in a file (engine/generate/prompt_cache.h): a prefix not saved in
  // memory is looked up there before it is fed, and a fed one is stored there.
  void UseFile(PromptCache* file) { file_ = file; }

  enum class Source { kFed, kMemory, kFile };
  // Leaves the current forward exactly as if `prefix` had just been fed after Reset():
  // restored when it was saved (in memory or in the file), else fed and saved. With
  // `probe_pad` (the run computes the probe heads; the tokenizer's pad id) the file keeps
  // the heads' pool of the prefix (engine/probe_heads.h) instead of its lane means: a state
  // from the file then records from the prefix on, and prefix_pool() has the rest.
  absl::StatusOr<Source> Start(std::span<const int32_t> prefix,
                               std::optional<int32_t> probe_pad = std::nullopt);
  // The probe heads' pool of the prefix the last Start loaded from the file, else null.
  const ProbeBlock* prefix_pool() const { return pool_ ? &*pool_ : nullptr; }

  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  size_t file_hits() const { return file_hits_; }

 private:
  struct Entry {
    const Model* model = nullptr;
    std::string path;
    ForwardOptions options;
    std::unique_ptr<Forward> forward;
    std::string model_sha256;  // computed when a file is used
    std::list<std::pair<std::vector<int32_t>, std::unique_ptr<Forward::State>>> saved;
  };
  std::list<Entry> entries_;  // the current one first
  PromptCache* file_ = nullptr;
  std::optional<ProbeBlock> pool_;
  size_t hits_ = 0, misses_ = 0, file_hits_ = 0;
};

}  // namespace cact
