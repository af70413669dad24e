#include "train/official_adapter.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace cact::train {

absl::StatusOr<FlaxAdapterToWrite> OfficialAdapterLayout(const PeftAdapter& ad,
                                                         const OfficialAdapterInfo& info) {
  // Pairs by projection, in the order of their first appearance (finetune: q, k, v, gate, out).
  std::vector<std::string> order;
  std::map<std::string, std::map<uint32_t, const PeftLoraPair*>> by_proj;
  for (const PeftLoraPair& p : ad.pairs) {
    if (!by_proj.count(p.proj)) order.push_back(p.proj);
    by_proj[p.proj][p.layer] = &p;
  }
  FlaxAdapterToWrite out;
  out.scale = ad.alpha / double(ad.rank);
  out.base = info.base;
  out.rank = ad.rank;
  out.qat_bits = info.qat_bits;
  out.qat_bits_map = info.qat_bits_map;
  out.seed = info.seed;
  const size_t r = ad.rank;
  for (const std::string& proj : order) {
    const auto& layers = by_proj[proj];
    const PeftLoraPair& first = *layers.begin()->second;
    FlaxAdapterToWrite::Target t;
    t.path = "stack/layers/block/self_attn/" + proj + "/kernel";
    t.layers = uint32_t(layers.size());
    t.in = first.in;
    t.out = first.out;
    if (layers.rbegin()->first + 1 != layers.size())
      return absl::InvalidArgumentError(absl::StrCat(
          proj, ": the official layout stacks every layer 0..L-1; the adapter has ", layers.size(),
          " layers up to ", layers.rbegin()->first));
    t.a.resize(size_t(t.layers) * t.in * r);
    t.b.resize(size_t(t.layers) * r * t.out);
    for (const auto& [l, p] : layers) {
      if (p->in != t.in || p->out != t.out || p->a.size() != r * t.in || p->b.size() != t.out * r)
        return absl::InvalidArgumentError(
            absl::StrCat(proj, " layer ", l, ": shapes differ from layer 0's"));
      float* a = t.a.data() + size_t(l) * t.in * r;   // [in, r] <- PEFT A [r, in]
      float* b = t.b.data() + size_t(l) * r * t.out;  // [r, out] <- PEFT B [out, r]
      for (size_t k = 0; k < r; ++k)
        for (size_t i = 0; i < t.in; ++i) a[i * r + k] = p->a[k * t.in + i];
      for (size_t o = 0; o < t.out; ++o)
        for (size_t k = 0; k < r; ++k) b[k * t.out + o] = p->b[o * r + k];
    }
    out.targets.push_back(std::move(t));
  }
  return out;
}

absl::Status WriteOfficialAdapter(const std::string& path, const PeftAdapter& adapter,
                                  const OfficialAdapterInfo& info) {
  absl::StatusOr<FlaxAdapterToWrite> layout = OfficialAdapterLayout(adapter, info);
  if (!layout.ok())
    return absl::InvalidArgumentError(path + ": " + std::string(layout.status().message()));
  return WriteFlaxAdapter(path, *layout);
}

}  // namespace cact::train
