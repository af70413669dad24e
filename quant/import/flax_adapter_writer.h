// The official Needle LoRA adapter pickle, as the trainer's finetune_local saves it
// (cactus-compute/needle, needle/model/finetune.py): pickle.dump's protocol 4 of a dict with
// these keys, in this order,
//   "lora": {"stack/layers/block/self_attn/<proj>/kernel": {"A": float32 [L, in, rank],
//                                                           "B": float32 [L, rank, out]}, ...}
//   "scale": float (alpha / rank)     "base": str (the checkpoint it was trained on)
//   "rank": int    "qat_bits": int or None    "qat_bits_map": str or None    "seed": int
// so that `needle build CKPT --lora ADAPTER` and our ReadFlaxAdapter / ReadAdapterFile read it.
// The inverse of ReadFlaxAdapter + AdapterAsStacked (flax_checkpoint.h): what this writes,
// they read back bit for bit.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cact {

struct FlaxAdapterToWrite {
  struct Target {
    std::string path;  // "stack/layers/block/self_attn/q_proj/kernel"
    uint32_t layers = 0, in = 0, out = 0;
    std::vector<float> a;  // [layers, in, rank], C order
    std::vector<float> b;  // [layers, rank, out]
  };
  std::vector<Target> targets;  // in this order (the trainer's: its params tree's)
  double scale = 0;
  std::string base;  // the checkpoint trained on, as given (the trainer's default:
                     // "checkpoints/needle2.pkl")
  int64_t rank = 0;
  std::optional<int64_t> qat_bits;          // the QAT width trained through, or None
  std::optional<std::string> qat_bits_map;  // or the checkpoint's bits map, or None
  int64_t seed = 0;
};

// The pickle's bytes. Refused, so that every adapter written reads back (ReadFlaxAdapter,
// ReadAdapterFile): no targets, a target other than the five attention projection kernels
// (q/k/v/gate/out_proj) or one twice, targets of different layer counts, a zero dimension or
// rank, A or B not [layers, in, rank] / [layers, rank, out] values, a non-finite value in A
// or B (every merged weight would be one), a non-finite scale, qat_bits outside 2-4,
// qat_bits_map not a scheme, both set, a base that is not UTF-8.
absl::StatusOr<std::string> FlaxAdapterPickle(const FlaxAdapterToWrite& adapter);

// FlaxAdapterPickle written atomically to `path` (lib/atomic_file.h).
absl::Status WriteFlaxAdapter(const std::string& path, const FlaxAdapterToWrite& adapter);

}  // namespace cact
