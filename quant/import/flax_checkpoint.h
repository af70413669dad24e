// The official fine-tuning artifacts, read through the restricted unpickler:
//  - a checkpoint `{"format_version", "params": <Flax tree>, "config", "step", "run"}`
//    becomes the canonical float weights that `build` takes, with the official exporter's
//    transposes ([in, out] kernels -> [out, in]), per-layer splits of the stacked arrays, mHC
//    phi layouts, engram table flattening and probe heads;
//  - an adapter `{"lora": {"stack/.../q_proj/kernel": {"A", "B"}}, "scale", "base", "rank"}`
//    becomes the stacked LoRA layout that ParseLoraAdapter reads.
// Errors name the file, the pickle path (params/stack/...) and the byte offset of the opcode
// that built the offending object.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/pickle.h"
#include "formats/safetensors.h"
#include "quant/import/lora.h"
#include "quant/scheme.h"

namespace cact {

// One array of a pickle, by its "/"-joined path ("params/stack/final_norm/scale").
struct PickleArrayAt {
  std::string path;
  const PickleArray* array = nullptr;
  uint64_t offset = 0;
};

enum class TrainingPickleKind { kCheckpoint, kAdapter };

struct FlaxCheckpoint {
  std::string file;
  std::optional<int64_t> format_version, step;
  std::string run;          // as text ("" when absent)
  std::string config_json;  // the config dict as JSON
  std::string weight_bits;  // the config's weight_bits as a scheme ("" when it names none)
  std::vector<PickleArrayAt> params;  // every array under "params", in file order
};

struct FlaxAdapter {
  std::string file;
  double scale = 0;
  std::optional<int64_t> rank;
  std::string base;  // the checkpoint it was trained on, as the trainer recorded it
  struct Target {
    std::string path;  // "stack/layers/block/self_attn/q_proj/kernel"
    PickleArrayAt a, b;
  };
  std::vector<Target> targets;
  // The numerics a quantization-aware fine-tune trained through (official finetune since
  // v2.0.12: an int width, or the checkpoint's bits map string; None or absent: none), and
  // its seed. `needle build` deploys them.
  std::optional<int64_t> qat_bits;
  std::optional<std::string> qat_bits_map;
  std::optional<int64_t> seed;
  std::vector<std::pair<std::string, std::string>> extra;  // other top-level scalars
};

// Which artifact the pickle's root is: a dict with "params" (checkpoint) or "lora" (adapter).
absl::StatusOr<TrainingPickleKind> ClassifyTrainingPickle(const PickleDocument& doc);

absl::StatusOr<FlaxCheckpoint> ReadFlaxCheckpoint(const PickleDocument& doc);
absl::StatusOr<FlaxAdapter> ReadFlaxAdapter(const PickleDocument& doc);

// The checkpoint's geometry (its config) with the header window the official exporter
// writes (ExporterKvWindow).
absl::StatusOr<Geometry> CheckpointGeometry(const FlaxCheckpoint& ckpt);

struct CanonicalWeights {
  Safetensors weights;  // canonical names, [out, in]; metadata config, kv_window_header, group
  std::vector<std::string> unused;  // params the exporter does not read (listed, not an error)
  std::string dtype;                // "float16", "float32" or "mixed"
};

// The exporter's view of the checkpoint. Every array it reads must have the shape the
// config implies and be float16 or float32; each tensor's FloatTensor::stored_dtype says
// which ("F16" / "F32"), so a later merge can round like the checkpoint's dtype does.
absl::StatusOr<CanonicalWeights> CheckpointToCanonical(const FlaxCheckpoint& ckpt,
                                                       const Geometry& g);

// The adapter as stacked safetensors ("<path>/A" [L, in, r], "<path>/B" [L, r, out], float32;
// metadata "scale") for ParseLoraAdapter.
absl::StatusOr<Safetensors> AdapterAsStacked(const FlaxAdapter& ad);

// `needle build CKPT --lora ADAPTER`'s merge, on canonical weights:
// W = W + (scale * (A @ B)).astype(W.dtype): the update (LoraDelta: float32, left to right over
// the rank) is rounded to the tensor's stored dtype, then the sum is rounded to it again.
absl::Status MergeLoraIntoWeights(const LoraAdapter& adapter, Safetensors* weights);

// What `build --checkpoint` and `convert` start from: the checkpoint's canonical weights
// with the adapter (when `adapter_path` is not empty) merged as `needle build --lora` does,
// and the scheme `needle build` would use (the config's weight_bits, else 4 bits).
struct CheckpointBuild {
  CanonicalWeights canonical;
  Geometry geometry;
  Scheme scheme;
  std::string scheme_source;
  // The adapter's QAT metadata (when recorded, it chose `scheme`): an explicit scheme that
  // contradicts it is refused (CheckSchemeAgainstQat).
  AdapterQat adapter_qat;
  std::string adapter_path;
  std::vector<std::string> notes;  // what was merged, which params were not read
};
absl::StatusOr<CheckpointBuild> LoadCheckpointForBuild(const std::string& checkpoint_path,
                                                       const std::string& adapter_path,
                                                       std::optional<double> scale_override);

// An adapter file as the safetensors ParseLoraAdapter reads: the official pickle (by its
// content, not its name) in the stacked layout, its targets and shapes first checked against
// `g` (errors give the pickle offsets); or a safetensors file as is.
absl::StatusOr<Safetensors> ReadAdapterFile(const std::string& path, const Geometry& g);

}  // namespace cact
