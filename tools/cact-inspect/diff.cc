// cact-inspect diff A B: header differences and, per tensor, identical / changed (code and
// norm agreement, max |difference| of dequantized values), so a user sees exactly what a
// rebuild touched. Exit 0 when identical, 1 when they differ (like diff(1)), 2 on bad input.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/geometry3_json.h"
#include "lib/counted.h"
#include "nlohmann/json.hpp"
#include "quant/cact_diff.h"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {

static const char* StatusName(TensorDiff::Status s) {
  switch (s) {
    case TensorDiff::Status::kIdentical:
      return "identical";
    case TensorDiff::Status::kChanged:
      return "changed";
    case TensorDiff::Status::kOnlyInA:
      return "only in A";
    case TensorDiff::Status::kOnlyInB:
      return "only in B";
  }
  return "?";
}

int RunDiff(const Options& o) {
  auto a = OpenAnyGeneration(o.file);
  if (!a.ok()) return Fail(a.status());
  auto b = OpenAnyGeneration(o.file_b);
  if (!b.ok()) return Fail(b.status());
  if (a->generation() != b->generation())
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "%s is generation %d and %s generation %d: diff compares files of one generation", o.file,
        a->generation(), o.file_b, b->generation())));
  auto d = DiffFiles(a->records(), b->records());
  if (!d.ok()) return Fail(d.status());
  if (a->gen3) {  // the records' header holds no Needle 3 geometry: compare it here
    const nlohmann::ordered_json ga = Geometry3ToJson(a->gen3->geometry());
    const nlohmann::ordered_json gb = Geometry3ToJson(b->gen3->geometry());
    for (const auto& [key, value] : ga.items())
      if (value != gb[key]) d->header.push_back({key, value.dump(), gb[key].dump()});
  }
  if (o.json) {
    nlohmann::ordered_json j;
    j["a"] = o.file;
    j["b"] = o.file_b;
    j["generation"] = a->generation();
    j["identical"] = d->identical();
    j["header"] = nlohmann::ordered_json::array();
    for (const auto& h : d->header)
      j["header"].push_back({{"field", h.field}, {"a", h.a}, {"b", h.b}});
    j["codebook_identical"] = d->codebook_identical;
    j["changed_tensors"] = d->changed();
    auto& ts = j["tensors"] = nlohmann::ordered_json::array();
    for (const auto& t : d->tensors) {
      nlohmann::ordered_json e{{"name", t.name},
                               {"status", StatusName(t.status)},
                               {"a_type", t.a_type},
                               {"b_type", t.b_type}};
      if (t.status == TensorDiff::Status::kChanged) {
        if (t.a_type.rfind("CQ", 0) == 0 && t.a_type == t.b_type && t.comparable) {
          e["code_agreement"] = t.code_agreement;
          e["norm_agreement"] = t.norm_agreement;
        }
        if (t.comparable) {
          e["max_abs_diff"] = t.max_abs_diff;  // null when a value is not finite
          e["max_abs_a"] = t.max_abs_a;
          e["non_finite"] = t.non_finite;
        }
      }
      ts.push_back(e);
    }
    std::printf("%s\n", j.dump(2).c_str());
    return d->identical() ? 0 : 1;
  }
  std::printf("A %s\nB %s\n", o.file.c_str(), o.file_b.c_str());
  if (d->header.empty()) {
    std::printf("header: identical\n");
  } else {
    Table h({"header field", "A", "B"});
    for (const auto& f : d->header) h.Add({f.field, f.a, f.b});
    h.Print(stdout, false);
  }
  std::printf("codebook: %s\n", d->codebook_identical ? "identical" : "DIFFERENT");
  Table t({"tensor", "status", "A", "B", ">codes equal", ">norms equal", ">max |diff|", ">rel"});
  for (const auto& x : d->tensors) {
    if (x.status == TensorDiff::Status::kIdentical && !o.all) continue;
    std::string codes, norms, diff, rel;
    if (x.status == TensorDiff::Status::kChanged) {
      // Code and norm agreement only mean something between records of the same width.
      bool same_cq = x.a_type.rfind("CQ", 0) == 0 && x.a_type == x.b_type && x.comparable;
      if (same_cq) {
        codes = absl::StrFormat("%.4f%%", 100 * x.code_agreement);
        norms = absl::StrFormat("%.4f%%", 100 * x.norm_agreement);
      }
      if (x.comparable) {
        if (x.non_finite) {
          diff = absl::StrFormat("NaN (%s)", Counted(x.non_finite, "non-finite value"));
        } else {
          diff = absl::StrFormat("%.3g", x.max_abs_diff);
          rel = x.max_abs_a > 0 ? absl::StrFormat("%.3g", x.max_abs_diff / x.max_abs_a) : "";
        }
      } else {
        diff = "shape differs";
      }
    }
    t.Add({x.name, StatusName(x.status), x.a_type, x.b_type, codes, norms, diff, rel});
  }
  int changed = d->changed();
  if (changed || o.all) t.Print(stdout, false);
  std::printf("%s: %d of %zu tensors changed%s\n", d->identical() ? "IDENTICAL" : "DIFFERENT",
              changed, d->tensors.size(), d->header.empty() ? "" : ", header differs");
  return d->identical() ? 0 : 1;
}

}  // namespace cact::inspect
