#include "quant/cact_diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "formats/cact/geometry_json.h"
#include "quant/cq/cq.h"
#include "quant/scheme.h"
#include "quant/tensor_values.h"

namespace cact {
namespace {

// Header fields as (name, printed value), in header order.
std::vector<std::pair<std::string, std::string>> HeaderFields(const Header& h) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"num_tensors", std::to_string(h.num_tensors)},
      {"codebook_len", std::to_string(h.codebook_len)}};
  const nlohmann::ordered_json geometry = GeometryToJson(h.geometry);  // keep alive while iterating
  for (const auto& [key, value] : geometry.items()) out.emplace_back(key, value.dump());
  return out;
}

bool SameBlob(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace

int CactDiff::changed() const {
  int n = 0;
  for (const auto& t : tensors) n += t.status != TensorDiff::Status::kIdentical;
  return n;
}

bool CactDiff::identical() const { return header.empty() && codebook_identical && changed() == 0; }

absl::StatusOr<CactDiff> DiffFiles(const CactFile& a, const CactFile& b) {
  CactDiff d;
  auto ha = HeaderFields(a.header()), hb = HeaderFields(b.header());
  for (size_t i = 0; i < ha.size(); ++i)
    if (ha[i].second != hb[i].second) d.header.push_back({ha[i].first, ha[i].second, hb[i].second});
  d.codebook_identical = a.codebook().size() == b.codebook().size() &&
                         std::equal(a.codebook().begin(), a.codebook().end(), b.codebook().begin());

  std::map<std::string, const TensorEntry*> in_b;
  for (const TensorEntry& t : b.tensors()) in_b[t.name] = &t;
  for (const TensorEntry& ta : a.tensors()) {
    TensorDiff td;
    td.name = ta.name;
    td.a_type = TypeLabel(ta.record);
    auto it = in_b.find(ta.name);
    if (it == in_b.end()) {
      td.status = TensorDiff::Status::kOnlyInA;
      d.tensors.push_back(td);
      continue;
    }
    const TensorEntry& tb = *it->second;
    in_b.erase(it);
    td.b_type = TypeLabel(tb.record);
    std::span<const uint8_t> ba = a.blob(ta), bb = b.blob(tb);
    bool same_meta = ta.record.dtype == tb.record.dtype && ta.record.ndim == tb.record.ndim &&
                     ta.record.shape == tb.record.shape && ta.record.group == tb.record.group &&
                     ta.record.bits == tb.record.bits;
    if (same_meta && SameBlob(ba, bb)) {
      d.tensors.push_back(td);
      continue;
    }
    td.status = TensorDiff::Status::kChanged;
    td.comparable = ta.shape() == tb.shape() && ta.record.dtype != DType::kRAW &&
                    tb.record.dtype != DType::kRAW;
    if (same_meta && ta.is_cq()) {
      CqShape s = CqShapeOf(ta);
      CqMatrix ma = UnpackBlob(ba, s), mb = UnpackBlob(bb, s);
      size_t eq = 0;
      for (size_t i = 0; i < ma.codes.size(); ++i) eq += ma.codes[i] == mb.codes[i];
      td.code_agreement = ma.codes.empty() ? 1.0 : double(eq) / double(ma.codes.size());
      size_t neq = 0;
      for (size_t i = 0; i < ma.norms.size(); ++i) neq += ma.norms[i] == mb.norms[i];
      td.norm_agreement = ma.norms.empty() ? 1.0 : double(neq) / double(ma.norms.size());
    } else if (ta.is_cq() || tb.is_cq()) {
      td.code_agreement = 0.0;
      td.norm_agreement = 0.0;
    }
    if (td.comparable) {
      auto va = TensorValues(a, ta);
      auto vb = TensorValues(b, tb);
      if (!va.ok()) return va.status();
      if (!vb.ok()) return vb.status();
      for (size_t i = 0; i < va->size(); ++i) {
        // std::max drops a NaN: non-finite values are counted, and make the maximum NaN.
        if (!std::isfinite((*va)[i]) || !std::isfinite((*vb)[i])) {
          ++td.non_finite;
          continue;
        }
        td.max_abs_diff = std::max(td.max_abs_diff, double(std::fabs((*va)[i] - (*vb)[i])));
        td.max_abs_a = std::max(td.max_abs_a, double(std::fabs((*va)[i])));
      }
      if (td.non_finite) td.max_abs_diff = std::numeric_limits<double>::quiet_NaN();
    }
    d.tensors.push_back(td);
  }
  for (const TensorEntry& tb : b.tensors()) {
    if (!in_b.count(tb.name)) continue;
    TensorDiff td;
    td.name = tb.name;
    td.b_type = TypeLabel(tb.record);
    td.status = TensorDiff::Status::kOnlyInB;
    d.tensors.push_back(td);
  }
  return d;
}

}  // namespace cact
