// Quantization-aware training: the forward sees every CQ matrix as the .cact will store it
// (quantized and dequantized by the quant library itself, so the rounding is the file's),
// while the gradient passes straight through to the float weights (STE):
//   w_eff = w + stop_gradient(dequant(quant(w)) - w).
#pragma once
#include <map>
#include <string>

#include "quant/scheme.h"
#include "libtorch/needle_net.h"

namespace cact::train {

struct FakeQuantOptions {
  std::map<std::string, uint32_t> bits;  // record bits per CQ matrix; absent = not faked
  uint32_t group = 128;
};

// The widths `cact-quant build --scheme` gives each CQ matrix of the geometry.
std::map<std::string, uint32_t> WidthsOfScheme(const Geometry& g, const Scheme& scheme);

// The CQ round trip of one float32 [out, in] matrix at `bits` (record bits: 2, 3, 4, 5).
torch::Tensor CqRoundTrip(const torch::Tensor& w, uint32_t bits, uint32_t group);

// `w` with every matrix named in opt.bits replaced by its STE fake-quantized value; vectors
// (norms, gates, diagonals) pass unchanged, as they stay FP16-class in the file.
WeightMap FakeQuantized(const WeightMap& w, const FakeQuantOptions& opt);

}  // namespace cact::train
