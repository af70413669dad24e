// Helpers for the kernel tests: the official codebooks from the fixtures, random CQ blobs,
// and plain oracles (bitstream reader, dense Sylvester Hadamard) written independently of
// the kernels.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/kernels/cq_kernels.h"
#include "formats/cact/header.h"  // the CQ type table (constexpr; nothing to link)
#include "support/test_support.h"

namespace cact::kernels::testing {

inline std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa :
       {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAvx512Vbmi, Isa::kAmx})
    if (IsaSupported(isa)) out.push_back(isa);
  return out;
}

inline std::string WidthKey(uint32_t bits) { return FindCqType(bits)->width; }

// Official float32 codebook for (bits, group) from the fixture's codebooks.json; group 512
// (not in the file) is the group-256 table times sqrt(1/2).
inline std::vector<float> OfficialCodebook(uint32_t bits, uint32_t group) {
  static const nlohmann::json j = [] {
    std::ifstream f(cact::testing::Fixture("tiny", "codebooks.json"));
    return nlohmann::json::parse(f);
  }();
  uint32_t g = group == 512 ? 256 : group;
  const auto& e = j.at("codebooks").at("bits" + WidthKey(bits) + "_group" + std::to_string(g));
  std::vector<float> out;
  for (const auto& h : e.at("hex")) {
    uint32_t u = uint32_t(std::stoul(h.get<std::string>(), nullptr, 16));
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(group == 512 ? float(double(f) * std::sqrt(0.5)) : f);
  }
  return out;
}

// Positive normal FP16 in [0.25, 4): exponent 13..16, random mantissa.
inline uint16_t RandomNormHalf(std::mt19937& rng) {
  uint32_t e = 13 + rng() % 4, m = rng() % 1024;
  return uint16_t((e << 10) | m);
}
inline double HalfValue(uint16_t h) {  // normal positive halves only (what we generate)
  uint32_t e = (h >> 10) & 31, m = h & 1023;
  return std::ldexp(1.0 + m / 1024.0, int(e) - 15);
}

struct RandomCq {
  uint32_t out, in, group, bits;
  std::vector<uint8_t> blob;
  std::vector<uint32_t> codes;  // [out][in_pad] as stored (ternary: crumbs)
  std::vector<uint16_t> norms;  // [out][groups]
  uint32_t in_pad() const { return (in + group - 1) / group * group; }
  uint32_t groups() const { return in_pad() / group; }
  uint32_t code_bits() const { return CqCodeBits(bits); }
};

// Random codes packed as an LSB-first bitstream per row (written bit by bit), random norms.
inline RandomCq MakeRandomCq(uint32_t out, uint32_t in, uint32_t group, uint32_t bits,
                             std::mt19937& rng) {
  RandomCq m{out, in, group, bits, {}, {}, {}};
  const uint32_t ip = m.in_pad(), cb = m.code_bits();
  const size_t row_bytes = size_t(ip) * cb / 8;
  m.blob.assign(row_bytes * out + size_t(out) * m.groups() * 2, 0);
  m.codes.resize(size_t(out) * ip);
  static const uint32_t crumbs[3] = {3, 0, 1};
  for (uint32_t r = 0; r < out; ++r)
    for (uint32_t k = 0; k < ip; ++k) {
      uint32_t c = bits == kTernaryBits ? crumbs[rng() % 3] : rng() % (1u << bits);
      m.codes[size_t(r) * ip + k] = c;
      for (uint32_t b = 0; b < cb; ++b)
        if (c >> b & 1) {
          size_t bit = size_t(k) * cb + b;
          m.blob[r * row_bytes + bit / 8] |= uint8_t(1u << (bit % 8));
        }
    }
  m.norms.resize(size_t(out) * m.groups());
  uint8_t* np = m.blob.data() + row_bytes * out;
  for (size_t i = 0; i < m.norms.size(); ++i) {
    m.norms[i] = RandomNormHalf(rng);
    np[2 * i] = uint8_t(m.norms[i] & 0xFF);
    np[2 * i + 1] = uint8_t(m.norms[i] >> 8);
  }
  return m;
}

// Codebook value (float) of a stored code: ternary crumbs 3, 0, 1 -> cb[0], cb[1], cb[2].
inline double CodeValue(const std::vector<float>& cb, uint32_t bits, uint32_t code) {
  if (bits == kTernaryBits) return code == 3 ? cb[0] : code == 0 ? cb[1] : cb[2];
  return cb[code];
}

// Dense Sylvester Hadamard entry H[i][j] = (-1)^popcount(i & j) (unnormalised).
inline double HadamardSign(uint32_t i, uint32_t j) {
  return __builtin_popcount(i & j) % 2 ? -1.0 : 1.0;
}

inline std::vector<float> RandomVector(size_t n, std::mt19937& rng, double sd = 1.0) {
  std::normal_distribution<double> nd(0.0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = float(nd(rng));
  return v;
}

// A random CQ matrix with its float codebook and the kernels' int8 form of it.
struct Case {
  RandomCq cq;
  std::vector<float> cb;
  Int8Codebook cb8;
  CqKernelMatrix m;
};

inline Case MakeCase(uint32_t out, uint32_t in, uint32_t group, uint32_t bits, std::mt19937& rng,
                     bool cb_residual = false) {
  RandomCq cq = MakeRandomCq(out, in, group, bits, rng);
  std::vector<float> cb = OfficialCodebook(bits, group);
  Int8Codebook cb8 =
      MakeInt8Codebook(cb, cq.code_bits(), cb_residual && bits != kTernaryBits).value();
  auto m = CqKernelMatrix::Create(cq.blob, out, in, group, cq.code_bits(), cb8);
  EXPECT_TRUE(m.ok()) << m.status();
  return Case{std::move(cq), std::move(cb), cb8, std::move(m).value()};
}

// The matrix as created (the kernels read its rows) and, for widths with tiles, a copy
// with its 16-row tiles (kernels that read tiles use them): every result must be the same
// from both.
class RowsAndTiles {
 public:
  explicit RowsAndTiles(const CqKernelMatrix& m) : tiled_(m) {
    list_.push_back(&m);
    if (tiled_.BuildTiles()) list_.push_back(&tiled_);
  }
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }

 private:
  CqKernelMatrix tiled_;
  std::vector<const CqKernelMatrix*> list_;
};

// Precision modes: int8 activations or two-level (q1 + q2/128); codebook with or without
// its residual (lo). Every kernel handles the four combinations.
struct Mode {
  ActPrecision act;
  bool cb_residual;
};
inline constexpr Mode kModes[] = {{ActPrecision::kInt8, false},
                                  {ActPrecision::kInt8x2, false},
                                  {ActPrecision::kInt8, true},
                                  {ActPrecision::kInt8x2, true}};
inline std::string ModeName(Mode m) {
  return std::string(m.act == ActPrecision::kInt8x2 ? "int8x2" : "int8") +
         (m.cb_residual ? "+cblo" : "");
}

}  // namespace cact::kernels::testing
