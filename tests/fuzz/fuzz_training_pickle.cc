// The official training artifacts over arbitrary pickles: whatever the unpickler accepts is
// classified, and a checkpoint goes through the exporter's mapping (config -> geometry ->
// canonical weights), an adapter through its checks against the tiny fixture's geometry and
// into the stacked LoRA layout and its per-layer pairs. Every failure must be a named error.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/pickle.h"
#include "fuzz_common.h"
#include "quant/import/flax_checkpoint.h"
#include "quant/weights_geometry.h"

using namespace cact;

namespace {

void CheckError(const absl::Status& st) {
  const std::string msg(st.message());
  CACT_FUZZ_CHECK(!msg.empty(), "errors say what is wrong");
}

const Geometry& TinyGeometry() {
  static const Geometry g = [] {
    Geometry t;
    t.vocab = 512, t.d_model = 128, t.num_heads = 4, t.num_kv_heads = 2, t.head_dim = 32;
    t.num_layers = 4, t.hada_n = 128;
    return t;
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = PickleDocument::Parse(
      FileBytes::FromBuffer("fuzz.pkl", std::vector<uint8_t>(data, data + size)));
  if (!doc.ok()) return 0;
  auto kind = ClassifyTrainingPickle(*doc);
  if (!kind.ok()) return CheckError(kind.status()), 0;
  if (*kind == TrainingPickleKind::kCheckpoint) {
    auto ckpt = ReadFlaxCheckpoint(*doc);
    if (!ckpt.ok()) return CheckError(ckpt.status()), 0;
    auto g = CheckpointGeometry(*ckpt);
    if (!g.ok()) return CheckError(g.status()), 0;
    auto cw = CheckpointToCanonical(*ckpt, *g);
    if (!cw.ok()) return CheckError(cw.status()), 0;
    for (const FloatTensor& t : cw->weights.tensors) {
      uint64_t n = 1;
      for (uint32_t d : t.shape) n *= d;
      CACT_FUZZ_CHECK(n == t.data.size(), "a canonical tensor's shape fits its values");
    }
    return 0;
  }
  auto ad = ReadFlaxAdapter(*doc);
  if (!ad.ok()) return CheckError(ad.status()), 0;
  auto st = AdapterAsStacked(*ad);
  if (!st.ok()) return CheckError(st.status()), 0;
  auto lora = ParseLoraAdapter(*st, "fuzz.pkl", "", std::nullopt, TinyGeometry());
  if (!lora.ok()) return CheckError(lora.status()), 0;
  for (const LoraPair& p : lora->pairs) (void)LoraDelta(p, lora->scale);
  return 0;
}
