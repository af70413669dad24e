// An SVG histogram of per-token KL divergences on a log scale (they span many decades),
// with the mean, median and 99th percentile marked.
#pragma once
#include <string>
#include <vector>

#include "engine/eval/perplexity.h"

namespace cact {

std::string KldHistogramSvg(const CompareReport& report);

}  // namespace cact
