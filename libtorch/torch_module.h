// The libtorch side of the bridge, behind a header that includes no torch: building the
// exported TorchScript module, reading one back, and running one (tests, benchmarks).
//
// Parameter names in the module are the canonical tensor names: a name "a.b" is parameter
// "b" of submodule "a" (TorchScript attribute names cannot contain dots), so
// `named_parameters()` / `state_dict()` keys are exactly "embedding", "layer00.q_proj",
// "mhc_phi_res", "engram1.tables", "contrastive_head.proj", ... ("heads.manifest" is a
// buffer: it holds codes, not weights).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libtorch/origin.h"
#include "formats/cact/cact_file.h"
#include "formats/needle/block.h"
#include "formats/safetensors.h"

namespace cact::torchscript {

// Builds the module for `file` (dequantized FP32 weights, carried original bytes, JSON,
// TorchScript methods) and saves it atomically to `out_path`.
absl::Status ExportTorchScript(const CactFile& file, const std::string& out_path);
// The same with another block description than the file's (formats/needle/block.h): how the
// tests check that the emitter follows a change to it. `block` need only outlive the call.
absl::Status ExportTorchScript(const CactFile& file, const std::string& out_path,
                               const BlockSpec& block);

// What an exported (possibly edited) module holds.
struct ExportedModule {
  Origin origin;
  std::vector<uint8_t> source_bytes;  // the source .cact, reassembled and SHA-checked
  Safetensors values;                 // every parameter/buffer named like a source tensor
};
// Errors (exit 2 material): not a TorchScript archive, not made by cact-torch, damaged
// carried bytes. Missing/reshaped parameters are reported later by PlanReturn.
absl::StatusOr<ExportedModule> ReadExportedModule(const std::string& path);

// A loaded module, run from C++ (torch::jit::load). Tokens are [batch, T] row-major.
class TorchModel {
 public:
  static absl::StatusOr<std::unique_ptr<TorchModel>> Load(const std::string& path);
  ~TorchModel();

  bool HasMethod(const std::string& name) const;
  // [batch, T, vocab]
  absl::StatusOr<std::vector<float>> Logits(std::span<const int64_t> tokens, int64_t batch,
                                            std::optional<int64_t> window = std::nullopt,
                                            int64_t sink = 0);
  // [L, batch, T, d]
  absl::StatusOr<std::vector<float>> HiddenStates(std::span<const int64_t> tokens, int64_t batch,
                                                  std::optional<int64_t> window = std::nullopt,
                                                  int64_t sink = 0);
  // [batch] confidence logits / [batch, out] normalised retrieval embeddings.
  absl::StatusOr<std::vector<float>> Confidence(std::span<const int64_t> tokens, int64_t batch);
  absl::StatusOr<std::vector<float>> Retrieval(std::span<const int64_t> tokens, int64_t batch);
  // The module's cact_json attribute ("" if absent).
  std::string Json() const;
  // Applies the thread rule of blas_threads.h for `threads` (0 = the CPUs available).
  static void SetThreads(int threads);

 private:
  struct Impl;
  explicit TorchModel(std::unique_ptr<Impl> impl);
  absl::StatusOr<std::vector<float>> Call(const std::string& method,
                                          std::span<const int64_t> tokens, int64_t batch,
                                          std::optional<int64_t> window, int64_t sink);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cact::torchscript
