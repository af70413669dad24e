// Compares two quantizations of the same float matrix (ours and an oracle's) and explains
// every code disagreement: it must be a near-tie, i.e. the unit-vector value lies (in
// exact arithmetic, computed in double here) almost exactly between the two entries.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "quant/cq/cq.h"
#include "quant/cq/fp16.h"

namespace cact::testing {

struct CodeDisagreement {
  uint32_t row, col;
  uint8_t ours, theirs;
  double unit;    // exact (double) unit-vector value at that index
  double margin;  // | |u - cb[ours]| - |u - cb[theirs]| |
};

struct Agreement {
  uint64_t codes = 0, codes_equal = 0;
  uint64_t norms = 0, norms_equal = 0, norms_within_1ulp = 0;
  std::vector<CodeDisagreement> disagreements;
  double max_margin = 0;
  double code_fraction() const { return codes ? double(codes_equal) / double(codes) : 1.0; }
};

// Double-precision unit vector of one padded group (dense Sylvester Hadamard).
inline std::vector<double> ExactUnitGroup(const float* w, const CqShape& s, uint32_t row,
                                          uint32_t gi) {
  const uint32_t g = s.group;
  std::vector<double> x(g, 0.0), r(g, 0.0);
  for (uint32_t i = 0; i < g; ++i) {
    uint32_t col = gi * g + i;
    if (col < s.in) x[i] = w[uint64_t(row) * s.in + col];
  }
  double n2 = 0;
  for (uint32_t k = 0; k < g; ++k) {
    double acc = 0;
    for (uint32_t j = 0; j < g; ++j) acc += (__builtin_popcount(j & k) & 1 ? -x[j] : x[j]);
    r[k] = acc / std::sqrt(double(g));
    n2 += r[k] * r[k];
  }
  double n = std::max(std::sqrt(n2), 1e-12);
  for (double& v : r) v /= n;
  return r;
}

inline Agreement CompareQuantizations(const float* w, const CqShape& s, std::span<const float> cb,
                                      std::span<const uint8_t> ours,
                                      std::span<const uint8_t> theirs,
                                      std::span<const uint16_t> our_norms,
                                      std::span<const uint16_t> their_norms) {
  Agreement a;
  const uint32_t in_pad = s.in_pad();
  a.codes = ours.size();
  for (uint64_t i = 0; i < ours.size(); ++i) {
    if (ours[i] == theirs[i]) {
      ++a.codes_equal;
      continue;
    }
    CodeDisagreement d;
    d.row = uint32_t(i / in_pad);
    d.col = uint32_t(i % in_pad);
    d.ours = ours[i];
    d.theirs = theirs[i];
    std::vector<double> u = ExactUnitGroup(w, s, d.row, d.col / s.group);
    d.unit = u[d.col % s.group];
    auto dist = [&](uint8_t c) { return c < cb.size() ? std::fabs(d.unit - cb[c]) : INFINITY; };
    d.margin = std::fabs(dist(d.ours) - dist(d.theirs));
    a.max_margin = std::max(a.max_margin, d.margin);
    a.disagreements.push_back(d);
  }
  a.norms = our_norms.size();
  for (size_t i = 0; i < our_norms.size(); ++i) {
    if (our_norms[i] == their_norms[i]) ++a.norms_equal;
    // Same-sign finite halves: adjacent bit patterns are adjacent values.
    if (std::abs(int(our_norms[i]) - int(their_norms[i])) <= 1) ++a.norms_within_1ulp;
  }
  return a;
}

inline std::string Describe(const Agreement& a, size_t max_lines = 20) {
  std::string s = std::to_string(a.codes_equal) + "/" + std::to_string(a.codes) + " codes equal, " +
                  std::to_string(a.norms_equal) + "/" + std::to_string(a.norms) + " norms equal (" +
                  std::to_string(a.norms_within_1ulp) + " within 1 ulp)";
  for (size_t i = 0; i < a.disagreements.size() && i < max_lines; ++i) {
    const CodeDisagreement& d = a.disagreements[i];
    char line[200];
    std::snprintf(line, sizeof line,
                  "\n  row %u col %u: ours %u theirs %u, unit %.9g, distance difference %.3g",
                  d.row, d.col, unsigned(d.ours), unsigned(d.theirs), d.unit, d.margin);
    s += line;
  }
  return s;
}

}  // namespace cact::testing
