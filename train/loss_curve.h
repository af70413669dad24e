// The loss curve of a training run: a TSV for tools and an SVG for people (training and
// held-out loss against tokens seen, log-scaled loss axis, the quantization-aware phase
// shaded, the unigram baseline as a reference line).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cact::train {

struct LossPoint {
  int64_t step = 0, tokens = 0;
  double lr = 0, train_loss = 0, heldout_loss = NAN, seconds = 0;
  bool qat = false;
};

struct LossCurvePlot {
  std::string title;
  double unigram_loss = NAN;  // drawn as a dashed line when set
};

std::string LossCurveTsv(const std::vector<LossPoint>& points);
std::string LossCurveSvg(const std::vector<LossPoint>& points, const LossCurvePlot& plot);
// Atomic writes of the two.
absl::Status WriteLossCurveTsv(const std::string& path, const std::vector<LossPoint>& points);
absl::Status WriteLossCurveSvg(const std::string& path, const std::vector<LossPoint>& points,
                               const LossCurvePlot& plot);

}  // namespace cact::train
