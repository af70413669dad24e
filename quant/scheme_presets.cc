#include "quant/scheme_presets.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "formats/tokenizer_blob.h"
#include "lib/status.h"
#include "quant/build.h"
#include "quant/cq/codebook.h"
#include "quant/synthetic.h"

namespace cact {
namespace {

// PPL against the FP32 model on held-out text, measured on the trained reference model
// (docs/quality.md); "after QAT": weights trained with a quantization-aware phase at the
// needle widths. Exact calls: the tool-calling reference model's float weights (before its
// quantization-aware phase) built at the preset, on its 200 held-out-value queries.
// Order: largest to smallest file, like llama-quantize's list.
constexpr SchemePreset kPresets[] = {
    {"cq4", "default=4", "every matrix 4-bit: the quality reference", "+0.5% PPL; +0.7% after QAT",
     0.880},
    {"attn4", "embedding=4,mhc=4,attn=4,default=2",
     "needle with the attention projections 4-bit (only the engrams 2-bit)",
     "+3.4% PPL; -0.4% after QAT", 0.895},
    {"cq3", "default=3", "every matrix 3-bit", "+3.0% PPL; +2.0% after QAT", 0.875},
    {"needle", kDefaultScheme, "the released mix: embedding and mHC 4-bit, the rest 2-bit",
     "+5.4% PPL; -0.3% after QAT", 0.820},
    {"cq2", "default=2", "every matrix 2-bit, the embedding too", "+17.3% PPL; +10.0% after QAT",
     0.720},
    {"ternary", "default=1.58",
     "every matrix ternary (codes stored in 2-bit crumbs: the size of cq2)",
     "+45.4% PPL; +36.1% after QAT", 0.290},
};

double Megabytes(uint64_t bytes) { return double(bytes) / 1e6; }

struct Row {
  const SchemePreset* preset;
  PlannedSize size;
};

// The released geometry, heads, group and tokenizer size (the tokenizer is parsed once).
struct Needle2 {
  SyntheticPreset preset;
  uint64_t tokenizer_bytes = 0;
  PlannedSize Size(const Scheme& s) const {
    return PlanSize(s, preset.geometry, preset.heads, preset.group, tokenizer_bytes);
  }
};

absl::StatusOr<Needle2> LoadNeedle2() {
  CACT_ASSIGN_OR_RETURN(SyntheticPreset n2, FindSyntheticPreset("needle2"));
  CACT_ASSIGN_OR_RETURN(TokenizerBlob tok, SyntheticTokenizer(n2));
  return Needle2{std::move(n2), SerializeTokenizerBlob(tok).size()};
}

absl::StatusOr<std::vector<Row>> Rows() {
  CACT_ASSIGN_OR_RETURN(Needle2 n2, LoadNeedle2());
  std::vector<Row> rows;
  for (const SchemePreset& p : kPresets) {
    CACT_ASSIGN_OR_RETURN(Scheme s, ParseScheme(p.scheme));
    rows.push_back({&p, n2.Size(s)});
  }
  return rows;
}

std::string Names() {
  std::string s;
  for (const SchemePreset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

}  // namespace

std::span<const SchemePreset> SchemePresets() { return kPresets; }

absl::StatusOr<Scheme> SchemeFromPreset(std::string_view name) {
  for (const SchemePreset& p : kPresets)
    if (name == p.name) return ParseScheme(p.scheme);
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown preset \"%s\" (known: %s)", name, Names()));
}

PlannedSize PlanSize(const Scheme& scheme, const Geometry& g,
                     const std::vector<ProbeHeadSpec>& heads, uint32_t group,
                     uint64_t tokenizer_bytes) {
  std::vector<TensorRecord> records;
  for (const TensorSpec& t : CanonicalLayout(g, heads))
    records.push_back(PlannedRecord(t, scheme.BitsFor(t.name), group, tokenizer_bytes));
  PlannedSize out;
  out.file_bytes = AssignOffsets(&records, uint32_t(HeaderCodebook(group).size()));
  out.accounting = ComputeAccounting(records, out.file_bytes);
  return out;
}

absl::StatusOr<PlannedSize> Needle2Size(const Scheme& scheme) {
  CACT_ASSIGN_OR_RETURN(Needle2 n2, LoadNeedle2());
  return n2.Size(scheme);
}

absl::StatusOr<std::string> SchemePresetTable() {
  CACT_ASSIGN_OR_RETURN(std::vector<Row> rows, Rows());
  std::string s =
      absl::StrFormat("%-8s %-36s %11s %10s  %-28s %11s  %s\n", "preset", "scheme", "bits/weight",
                      "needle2 MB", "quality cost", "exact calls", "description");
  for (const Row& r : rows)
    s += absl::StrFormat("%-8s %-36s %11.4f %10.2f  %-28s %10.1f%%  %s\n", r.preset->name,
                         r.preset->scheme, r.size.accounting.payload_bpw,
                         Megabytes(r.size.file_bytes), r.preset->quality,
                         100 * r.preset->exact_calls, r.preset->description);
  return s;
}

absl::StatusOr<std::string> SchemePresetHelp() {
  CACT_ASSIGN_OR_RETURN(std::vector<Row> rows, Rows());
  std::string s = "Presets (--preset NAME; size of the released needle2 geometry):\n";
  for (const Row& r : rows)
    s += absl::StrFormat("  %-8s %-36s %6.2f MB %.2f bpw  quality: %s; %.1f%% exact calls\n",
                         r.preset->name, r.preset->scheme, Megabytes(r.size.file_bytes),
                         r.size.accounting.payload_bpw, r.preset->quality,
                         100 * r.preset->exact_calls);
  return s;
}

absl::StatusOr<nlohmann::ordered_json> SchemePresetJson() {
  CACT_ASSIGN_OR_RETURN(std::vector<Row> rows, Rows());
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    nlohmann::ordered_json p;
    p["name"] = r.preset->name;
    p["scheme"] = r.preset->scheme;
    p["description"] = r.preset->description;
    p["quality"] = r.preset->quality;
    p["exact_calls"] = r.preset->exact_calls;
    p["needle2_file_bytes"] = r.size.file_bytes;
    p["payload_bpw"] = r.size.accounting.payload_bpw;
    p["file_bpw"] = r.size.accounting.file_bpw;
    j.push_back(std::move(p));
  }
  return j;
}

}  // namespace cact
