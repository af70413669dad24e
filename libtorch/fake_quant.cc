#include "libtorch/fake_quant.h"

#include "formats/needle/tensor_table.h"
#include "quant/cq/codebook.h"
#include "quant/cq/cq.h"

namespace cact::train {

torch::Tensor CqRoundTrip(const torch::Tensor& w, uint32_t bits, uint32_t group) {
  torch::Tensor src = w.detach().to(torch::kFloat32).contiguous();
  CqShape shape;
  shape.out = uint32_t(src.size(0));
  shape.in = uint32_t(src.size(1));
  shape.group = group;
  shape.bits = bits;
  const std::vector<float> codebook = CqCodebook(bits, group);
  CqMatrix m = QuantizeMatrix(src.data_ptr<float>(), shape, codebook);
  std::vector<uint8_t> blob = PackBlob(m);
  torch::Tensor out = torch::empty_like(src);
  DequantizeBlobFwht(blob, shape, codebook, out.data_ptr<float>());
  return out.to(w.scalar_type());
}

std::map<std::string, uint32_t> WidthsOfScheme(const Geometry& g, const Scheme& scheme) {
  std::map<std::string, uint32_t> bits;
  for (const TensorSpec& s : CanonicalLayout(g, {}))
    if (s.kind == TensorKind::kMatrix) bits[s.name] = scheme.BitsFor(s.name);
  return bits;
}

WeightMap FakeQuantized(const WeightMap& w, const FakeQuantOptions& opt) {
  WeightMap out = w;
  for (const auto& [name, bits] : opt.bits) {
    const torch::Tensor& t = w.at(name);
    const torch::Tensor q = CqRoundTrip(t, bits, opt.group);
    out[name] = t + (q - t.detach());
  }
  return out;
}

}  // namespace cact::train
