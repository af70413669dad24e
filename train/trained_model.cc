#include "train/trained_model.h"

#include "quant/build.h"
#include "quant/synthetic.h"

namespace cact::train {

void SetModelMetadata(const Geometry& g, const Scheme& scheme,
                      const std::map<std::string, std::string>& extra, Safetensors* weights) {
  weights->metadata["config"] = OfficialConfigJson(g, {});
  weights->metadata["bits_map"] = scheme.ToString();
  weights->metadata["group"] = "128";
  weights->metadata["kv_window_header"] = std::to_string(g.kv_window);
  for (const auto& [k, v] : extra) weights->metadata[k] = v;
}

absl::StatusOr<RebuildReport> BuildTrainedCact(const Safetensors& weights,
                                               const TokenizerBlob& tokenizer,
                                               const std::string& tokenizer_source,
                                               const Scheme& scheme, const std::string& cact_path) {
  BuildRequest req;
  req.weights = &weights;
  req.weights_path = "trained weights";
  req.tokenizer = tokenizer;
  req.tokenizer_source = tokenizer_source;
  req.scheme = scheme;
  RebuildReport report;
  absl::StatusOr<CactContents> contents = BuildCact(req, &report);
  if (!contents.ok()) return contents.status();
  if (absl::Status s = FinishRebuild(*contents, cact_path, 0, &report); !s.ok()) return s;
  return report;
}

}  // namespace cact::train
