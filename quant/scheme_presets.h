// Named bit-width schemes (like llama-quantize's type list): `--preset cq4` instead of
// `--scheme default=4`. Each preset's size is computed for the released geometry from the
// same records a build writes, never typed in; its quality cost and tool-call accuracy come
// from docs/quality.md (tests/quality/measure_quality.sh measures them on trained models).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "formats/cact/accounting.h"
#include "formats/needle/tensor_table.h"
#include "nlohmann/json.hpp"
#include "quant/scheme.h"

namespace cact {

struct SchemePreset {
  const char* name;
  const char* scheme;       // ParseScheme text
  const char* description;  // one line
  const char* quality;      // measured cost from docs/quality.md
  // Share of held-out tool calls made exactly by the tool-calling reference model built at
  // this preset (docs/quality.md, "Tool calls per preset"): perplexity does not rank these.
  double exact_calls;
};

std::span<const SchemePreset> SchemePresets();
// The preset's scheme; an unknown name is an error listing the known ones.
absl::StatusOr<Scheme> SchemeFromPreset(std::string_view name);

// What a build with `scheme` writes for a geometry: file bytes and the accounting (as
// cact-inspect prints it), without any weights.
struct PlannedSize {
  uint64_t file_bytes = 0;
  Accounting accounting;
};
PlannedSize PlanSize(const Scheme& scheme, const Geometry& g,
                     const std::vector<ProbeHeadSpec>& heads, uint32_t group,
                     uint64_t tokenizer_bytes);
// PlanSize for the released geometry, probe heads and tokenizer (synthetic "needle2").
absl::StatusOr<PlannedSize> Needle2Size(const Scheme& scheme);

// Every preset with its needle2 size: a fixed-width table (one row a preset), the lines
// for a --help footer, or JSON (an array of objects).
absl::StatusOr<std::string> SchemePresetTable();
absl::StatusOr<std::string> SchemePresetHelp();
absl::StatusOr<nlohmann::ordered_json> SchemePresetJson();

}  // namespace cact
