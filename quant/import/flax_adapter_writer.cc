#include "quant/import/flax_adapter_writer.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "formats/pickle_writer.h"
#include "lib/atomic_file.h"
#include "lib/status.h"
#include "quant/scheme.h"

namespace cact {

namespace {

// The trainer's LORA_TARGETS under the stacked block, the only targets ReadAdapterFile takes.
bool IsProjectionKernel(const std::string& path) {
  for (const char* proj : {"q_proj", "k_proj", "v_proj", "gate_proj", "out_proj"})
    if (path == absl::StrCat("stack/layers/block/self_attn/", proj, "/kernel")) return true;
  return false;
}

absl::Status Refuse(const std::string& what) {
  return absl::InvalidArgumentError("LoRA adapter: " + what);
}

// `values` is [d0, d1, d2] of finite floats.
absl::StatusOr<PickleValue> Half(const std::string& name, const std::vector<float>& values,
                                 uint64_t d0, uint64_t d1, uint64_t d2) {
  uint64_t n = 0;
  if (__builtin_mul_overflow(d0, d1, &n) || __builtin_mul_overflow(n, d2, &n) || n != values.size())
    return Refuse(absl::StrFormat("%s has %d values; its shape [%d, %d, %d] needs %d", name,
                                  values.size(), d0, d1, d2, n));
  for (size_t k = 0; k < values.size(); ++k)
    if (!std::isfinite(values[k]))
      return Refuse(absl::StrFormat("%s value %d is %g (the merged weights would be too)", name, k,
                                    values[k]));
  return PickleValue::Float32Array({d0, d1, d2}, values);
}

}  // namespace

absl::StatusOr<std::string> FlaxAdapterPickle(const FlaxAdapterToWrite& ad) {
  if (ad.targets.empty()) return Refuse("no targets");
  if (ad.rank < 1 || ad.rank > int64_t(UINT32_MAX))
    return Refuse(absl::StrCat("rank ", ad.rank, " is not in 1..2^32-1"));
  if (!std::isfinite(ad.scale)) return Refuse(absl::StrFormat("scale %g is not finite", ad.scale));
  if (ad.qat_bits && (*ad.qat_bits < 2 || *ad.qat_bits > 4))
    return Refuse(absl::StrCat("qat_bits ", *ad.qat_bits, " is not a width 2, 3 or 4"));
  if (ad.qat_bits_map) {
    if (absl::StatusOr<Scheme> s = ParseScheme(*ad.qat_bits_map); !s.ok())
      return Refuse(absl::StrCat("qat_bits_map '", *ad.qat_bits_map,
                                 "': ", std::string(s.status().message())));
  }
  if (ad.qat_bits && ad.qat_bits_map)
    return Refuse("sets both qat_bits and qat_bits_map (finetune records one)");

  const uint64_t r = uint64_t(ad.rank);
  PickleValue lora = PickleValue::Dict();
  std::set<std::string> seen;
  for (const FlaxAdapterToWrite::Target& t : ad.targets) {
    if (!IsProjectionKernel(t.path))
      return Refuse(absl::StrCat("target '", t.path,
                                 "' is not a q/k/v/gate/out_proj kernel under "
                                 "stack/layers/block/self_attn/"));
    if (!seen.insert(t.path).second) return Refuse(absl::StrCat("target '", t.path, "' twice"));
    if (t.layers == 0 || t.in == 0 || t.out == 0)
      return Refuse(absl::StrFormat("target '%s' has a zero dimension (layers %d, in %d, out %d)",
                                    t.path, t.layers, t.in, t.out));
    if (t.layers != ad.targets.front().layers)
      return Refuse(absl::StrFormat("target '%s' has %d layers, '%s' %d", t.path, t.layers,
                                    ad.targets.front().path, ad.targets.front().layers));
    CACT_ASSIGN_OR_RETURN(PickleValue a, Half(t.path + "/A", t.a, t.layers, t.in, r));
    CACT_ASSIGN_OR_RETURN(PickleValue b, Half(t.path + "/B", t.b, t.layers, r, t.out));
    PickleValue pair = PickleValue::Dict();
    pair.Set("A", std::move(a)).Set("B", std::move(b));
    lora.entries.emplace_back(t.path, std::move(pair));  // paths checked unique above
  }

  PickleValue root = PickleValue::Dict();
  root.Set("lora", std::move(lora));
  root.Set("scale", PickleValue::Float(ad.scale));
  root.Set("base", PickleValue::Str(ad.base));
  root.Set("rank", PickleValue::Int(ad.rank));
  root.Set("qat_bits", ad.qat_bits ? PickleValue::Int(*ad.qat_bits) : PickleValue::None());
  root.Set("qat_bits_map",
           ad.qat_bits_map ? PickleValue::Str(*ad.qat_bits_map) : PickleValue::None());
  root.Set("seed", PickleValue::Int(ad.seed));
  absl::StatusOr<std::string> bytes = SerializePickle(root);
  if (!bytes.ok()) return Refuse(std::string(bytes.status().message()));  // a non-UTF-8 base
  return bytes;
}

absl::Status WriteFlaxAdapter(const std::string& path, const FlaxAdapterToWrite& adapter) {
  absl::StatusOr<std::string> bytes = FlaxAdapterPickle(adapter);
  if (!bytes.ok()) return FileError(path, std::string(bytes.status().message()));
  return WriteFileAtomic(path, std::span<const uint8_t>(
                                   reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
}

}  // namespace cact
