// The interface both forward paths implement (reference FP32 and the fast int8 path), so
// tools, the validator and the tests can drive either one.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model.h"

namespace cact {

// Key k is visible from query q iff k <= q and (window == 0 or q - k < window or k < sink).
// The engram history is never windowed.
struct AttentionWindow {
  uint32_t window = 0;  // 0 = plain causal
  uint32_t sink = 0;    // number of pinned first positions
  bool Visible(uint32_t q, uint32_t k) const {
    return k <= q && (window == 0 || q - k < window || k < sink);
  }
};

struct ForwardOptions {
  AttentionWindow attn;
  int threads = 1;
  bool keep_hidden = false;  // record the lane mean after each layer (hidden())
};

class Forward {
 public:
  virtual ~Forward();
  // Forgets every fed token (KV cache, engram history, hidden states).
  virtual void Reset() = 0;
  // Appends `tokens` at positions position()..position()+n-1. Writes logits [n, vocab]
  // (all_positions) or [1, vocab] for the last token only; `logits` may be null.
  // Errors (unknown id, sequence longer than max_seq_len) leave the state unchanged.
  virtual absl::Status Feed(std::span<const int32_t> tokens, std::vector<float>* logits,
                            bool all_positions) = 0;
  // Number of tokens fed since Reset().
  virtual uint32_t position() const = 0;
  // With keep_hidden: lane mean after each layer, [L][T][d] row-major for the T positions
  // hidden_from()..position()-1 (the layout of the fixtures' hidden_*.npy). Empty otherwise.
  virtual const std::vector<float>& hidden() const = 0;
  // The same values as recorded, [T][L][d]: no rearranged copy.
  virtual const std::vector<float>& hidden_by_position() const = 0;
  // The first position recorded: 0, unless a state was restored without the lane means of
  // its prefix (StateBytes with hidden = false).
  virtual uint32_t hidden_from() const { return 0; }
  // "reference", "fast", ...
  virtual std::string name() const = 0;

  // The sequence state (fed tokens, KV cache, engram history, recorded hidden states), to
  // feed a shared prefix once and continue from it many times. Restore() takes a state
  // saved by this same object (else FailedPrecondition) and makes the forward exactly what it
  // was then: feeding the same tokens gives bit-identical logits. Paths that cannot save
  // return nullptr / Unimplemented.
  class State {
   public:
    virtual ~State();
  };
  virtual std::unique_ptr<State> Save() const;
  virtual absl::Status Restore(const State& state);
  // Restore, taking the state instead of copying it (a state read from a file, used once).
  virtual absl::Status Adopt(std::unique_ptr<State> state) { return Restore(*state); }

  // A saved state as bytes, for a file (engine/generate/prompt_cache.h), and back. The
  // bytes hold the state only; the file keeps what it depends on (model, path, window,
  // sink). StateFromBytes checks every size against this forward and refuses values it
  // could not have written (ids outside the vocabulary, non-finite floats, int8 -128):
  // DataLoss naming `name`, the field and the byte offset (counted from `base`). With
  // hidden = false the recorded lane means are left out: the restored forward records from
  // the state's position on (hidden_from()).
  virtual absl::StatusOr<std::string> StateBytes(const State& state, bool hidden = true) const;
  virtual absl::StatusOr<std::unique_ptr<State>> StateFromBytes(std::string_view bytes,
                                                                const std::string& name,
                                                                uint64_t base = 0) const;

 protected:
  // The state as the path's own type when this forward saved it, else null.
  template <typename Saved, typename S>
  Saved* SavedHere(S* state) const {
    auto* s = dynamic_cast<Saved*>(state);
    return s && s->owner == this ? s : nullptr;
  }
  absl::Status NotSavedHere() const {
    return absl::FailedPreconditionError(name() + ": the state was saved by another forward");
  }
};

// The plain FP32 forward of the spec (engine/reference_forward.cc). Dequantizes every
// weight at construction; keeps an FP32 KV cache of the whole sequence.
std::unique_ptr<Forward> MakeReferenceForward(const Model& model, const ForwardOptions& options);

// Common input checks every path applies before touching its state: token ids in
// [0, vocab) and position() + n <= max_seq_len.
absl::Status CheckFeed(const Model& model, uint32_t position, std::span<const int32_t> tokens);

// The start of every Feed: CheckFeed, then `logits` (if not null) sized to [n, vocab] with
// all_positions, else [1, vocab] ([0] for no tokens), zero-filled.
absl::Status BeginFeed(const Model& model, uint32_t position, std::span<const int32_t> tokens,
                       std::vector<float>* logits, bool all_positions);

// The lane means recorded with keep_hidden: stored per position ([T][L][d], as the layers
// produce them) and rearranged to hidden()'s [L][T][d] on request.
class HiddenRecord {
 public:
  void Clear() {
    by_position_.clear();
    by_layer_.clear();
    first_ = 0;
  }
  // The position of the first row (0 unless restored without the rows before it).
  uint32_t first() const { return first_; }
  void set_first(uint32_t first) { first_ = first; }
  // [T][L][d]; the forward appends or resizes and writes rows.
  std::vector<float>& by_position() { return by_position_; }
  const std::vector<float>& by_position() const { return by_position_; }
  // [L][T][d] of the T = by_position().size() / (L * d) recorded positions.
  const std::vector<float>& ByLayer(size_t L, size_t d) const;

 private:
  std::vector<float> by_position_;
  mutable std::vector<float> by_layer_;  // rebuilt when its size is stale
  uint32_t first_ = 0;
};

}  // namespace cact
