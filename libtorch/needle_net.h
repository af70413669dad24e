// The Needle forward pass in eager libtorch, batched and differentiable: the model the
// trainer and the fine-tuner optimise. Same arithmetic as the spec (cact-spec.md section 3);
// the official decoder's fixture logits and the engine's FP32 reference are its oracles.
//
// Weights are not owned by the net: every call takes a WeightMap (canonical tensor name ->
// tensor, [out, in] like the .cact layout), so a training variant swaps tensors (fake
// quantization, LoRA-merged projections) without a second forward.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/safetensors.h"

namespace cact::train {

using WeightMap = std::map<std::string, torch::Tensor>;

struct AttentionWindow {
  int64_t window = 0;  // 0 = every earlier token visible
  int64_t sink = 0;    // tokens [0, sink) stay visible past the window
};

// The attention weights of one query head, captured during a forward (with their autograd
// history) so that a training loss can shape where the head looks.
struct AttentionTap {
  uint32_t layer = 0;
  uint32_t head = 0;    // query head
  torch::Tensor probs;  // [B, T queries, T keys], set by the forward
};

class NeedleNet {
 public:
  // Follows g.block() (formats/needle/block.h); throws if it is not a block this forward
  // implements (RoPE pairing, stage order, hash range).
  explicit NeedleNet(const Geometry& g);
  const Geometry& geometry() const { return g_; }

  // tokens [B, T] int64 -> logits [B, T, vocab] in the weights' dtype. Each tap given gets
  // its head's attention weights.
  torch::Tensor Logits(const torch::Tensor& tokens, const WeightMap& w, AttentionWindow window = {},
                       std::vector<AttentionTap>* attention_taps = nullptr) const;
  // The final-norm output [B, T, d] (the logits are it times embedding^T).
  torch::Tensor FinalHidden(const torch::Tensor& tokens, const WeightMap& w,
                            AttentionWindow window = {},
                            std::vector<AttentionTap>* attention_taps = nullptr) const;

 private:
  // The block's stages that have weights of their own: bx plus their contribution.
  torch::Tensor Attention(uint32_t l, const torch::Tensor& bx, const torch::Tensor& cos,
                          const torch::Tensor& sin, const torch::Tensor& mask, const WeightMap& w,
                          std::vector<AttentionTap>* attention_taps) const;
  torch::Tensor HadamardMlp(uint32_t l, const torch::Tensor& x, const torch::Tensor& walsh,
                            const WeightMap& w) const;
  std::pair<torch::Tensor, torch::Tensor> Engram(uint32_t site, const torch::Tensor& tokens,
                                                 const WeightMap& w) const;
  Geometry g_;
};

// Mean token cross-entropy of logits [B, T, V] against next tokens: positions t < T-1
// predict tokens[:, t+1]; `mask` [B, T] (float, may be undefined = all ones) weights the
// predicted positions (the mask of position t+1, as the official fine-tune does).
torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& tokens,
                            const torch::Tensor& mask = {});

// Fresh weights as the official architecture initialises them: projections N(0, 0.02),
// out/value projections N(0, 0.02 / sqrt(2 L)), norms and gates 0, Hadamard diagonals 1, 1,
// 0.02, mHC routing near identity (b_res = 4 I, a = 0.01), first engram tap 1. Deterministic
// in `seed`. float32, no probe heads.
WeightMap InitialWeights(const Geometry& g, uint64_t seed);

// Conversions with the float safetensors the quant library builds from (canonical names,
// logical shapes). FromSafetensors checks every core tensor of the geometry is present with
// its shape; extra tensors (probe heads) are kept.
absl::StatusOr<WeightMap> FromSafetensors(const Safetensors& st, const Geometry& g,
                                          const std::string& source);
Safetensors ToSafetensors(const WeightMap& w, const Geometry& g);

// Number of elements over all tensors.
int64_t ParameterCount(const WeightMap& w);

}  // namespace cact::train
