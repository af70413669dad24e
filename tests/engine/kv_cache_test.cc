// The int8 KV cache: per-vector absmax quantization, ring + pinned sink bounded by
// window + sink (+ chunk slack), the reference visibility rule across many wraps, and
// attention against a plain double-precision oracle over the dequantized rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops.h"
#include "engine/kv_cache.h"

namespace cact {
namespace {

std::vector<float> Randn(size_t n, std::mt19937& rng, double sd = 1.0) {
  std::normal_distribution<double> nd(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = float(nd(rng));
  return v;
}

TEST(KvCache, QuantizesEachVectorToInt8WithAbsmaxScale) {
  std::mt19937 rng(1);
  KvCache kv(2, 3, 24, {0, 0}, 16, 0);
  for (uint32_t l = 0; l < 2; ++l)
    for (uint32_t h = 0; h < 3; ++h) {
      std::vector<float> k = Randn(24, rng, 2.0), v = Randn(24, rng, 0.5);
      kv.Store(l, h, 0, k.data(), v.data());
      int8_t q[24];
      float s;
      for (int which = 0; which < 2; ++which) {
        const std::vector<float>& x = which ? v : k;
        if (which)
          kv.ValueRow(l, h, 0, q, &s);
        else
          kv.KeyRow(l, h, 0, q, &s);
        float amax = 0;
        for (float e : x) amax = std::max(amax, std::fabs(e));
        EXPECT_FLOAT_EQ(s, amax / 127.f);
        int qmax = 0;
        for (int c = 0; c < 24; ++c) {
          EXPECT_LE(std::fabs(q[c] * s - x[c]), s * 0.5f * 1.0001f);
          qmax = std::max(qmax, std::abs(int(q[c])));
        }
        EXPECT_EQ(qmax, 127);
      }
    }
}

TEST(KvCache, MemoryIsBoundedByWindowPlusSink) {
  KvCache a(27, 4, 64, {256, 0}, 2048, 64);
  EXPECT_EQ(a.rows(), 256u + 64u);
  KvCache b(27, 4, 64, {256, 40}, 2048, 64);
  EXPECT_EQ(b.rows(), 40u + 256u + 64u);
  KvCache c(27, 4, 64, {256, 40}, 200, 64);  // never more than the sequence can hold
  EXPECT_EQ(c.rows(), 200u);
  KvCache full(2, 1, 8, {0, 0}, 300, 64);  // window 0: plain causal, whole sequence
  EXPECT_EQ(full.rows(), 300u);
  // needle2 geometry, window 256: 27 layers x 4 heads x 320 rows x (64 + 64 + 8) bytes.
  EXPECT_EQ(a.bytes(), size_t(27) * 4 * 320 * (64 * 2 + 8));
}

// The query as the scores see it (kernels::AttendInt8): absmax int8 levels, dequantized.
std::vector<double> QuantizedQuery(const float* q, uint32_t hd, kernels::ActPrecision query) {
  float amax = 0;
  for (uint32_t c = 0; c < hd; ++c) amax = std::max(amax, std::fabs(q[c]));
  std::vector<double> out(hd);
  for (uint32_t c = 0; c < hd; ++c) {
    const float p = q[c] * (127.f / amax);
    const float q1 = std::clamp(std::nearbyint(p), -127.f, 127.f);
    double v = q1;
    if (query == kernels::ActPrecision::kInt8x2)
      v += std::clamp(std::nearbyint((p - q1) * 128.f), -127.f, 127.f) / 128.0;
    out[c] = v * amax / 127;
  }
  return out;
}

// Double-precision attention over the dequantized rows recorded at Store time.
void OracleAttend(
    const std::map<uint32_t, std::pair<std::vector<double>, std::vector<double>>>& rows,
    const AttentionWindow& w, uint32_t pos, const std::vector<double>& q, uint32_t hd,
    std::vector<double>* out) {
  std::vector<double> s;
  std::vector<const std::vector<double>*> vals;
  for (const auto& [k, kv] : rows) {
    if (!w.Visible(pos, k)) continue;
    double d = 0;
    for (uint32_t c = 0; c < hd; ++c) d += q[c] * kv.first[c];
    s.push_back(d / std::sqrt(double(hd)));
    vals.push_back(&kv.second);
  }
  double mx = *std::max_element(s.begin(), s.end()), sum = 0;
  for (double& e : s) sum += (e = std::exp(e - mx));
  out->assign(hd, 0.0);
  for (size_t i = 0; i < s.size(); ++i)
    for (uint32_t c = 0; c < hd; ++c) (*out)[c] += s[i] / sum * (*vals[i])[c];
}

TEST(KvCache, RingAndSinkFollowTheVisibilityRuleAcrossManyWraps) {
  for (auto [window, sink, slack, query] : {std::tuple{8u, 3u, 4u, kernels::ActPrecision::kInt8},
                                            {8u, 0u, 0u, kernels::ActPrecision::kInt8x2},
                                            {5u, 7u, 2u, kernels::ActPrecision::kInt8},
                                            {0u, 0u, 0u, kernels::ActPrecision::kInt8x2}}) {
    const uint32_t hd = 24, n_q = 2, max_seq = 120;
    const AttentionWindow w{window, sink};
    KvCache kv(1, 1, hd, w, max_seq, slack, query);
    std::mt19937 rng(window * 100 + sink);
    std::map<uint32_t, std::pair<std::vector<double>, std::vector<double>>> stored;
    std::vector<float> scratch(n_q * (kv.rows() + 16)), out(n_q * hd);
    for (uint32_t pos = 0; pos < max_seq; ++pos) {
      std::vector<float> k = Randn(hd, rng), v = Randn(hd, rng);
      kv.Store(0, 0, pos, k.data(), v.data());
      int8_t q8[hd];
      float s;
      std::vector<double> kd(hd), vd(hd);
      kv.KeyRow(0, 0, pos, q8, &s);
      for (uint32_t c = 0; c < hd; ++c) kd[c] = q8[c] * double(s);
      kv.ValueRow(0, 0, pos, q8, &s);
      for (uint32_t c = 0; c < hd; ++c) vd[c] = q8[c] * double(s);
      stored[pos] = {kd, vd};
      // Held rows: the pinned prefix and the last window + slack positions.
      for (uint32_t k2 = 0; k2 <= pos; ++k2) {
        const bool want = window == 0 || k2 < sink || pos - k2 < window + slack;
        ASSERT_EQ(kv.Holds(0, k2), want) << "pos " << pos << " key " << k2;
      }
      std::vector<float> q = Randn(n_q * hd, rng, 0.7);
      kv.Attend(0, 0, pos, q.data(), n_q, out.data(), scratch.data());
      for (uint32_t i = 0; i < n_q; ++i) {
        std::vector<double> want;
        OracleAttend(stored, w, pos, QuantizedQuery(q.data() + i * hd, hd, query), hd, &want);
        for (uint32_t c = 0; c < hd; ++c)
          ASSERT_NEAR(out[i * hd + c], want[c], 2e-5 * (1 + std::fabs(want[c])))
              << "window " << window << " sink " << sink << " pos " << pos << " head " << i;
      }
    }
  }
}

TEST(KvCache, PinnedRowsStayVisible) {
  // A query aligned with pinned key 1 keeps attending to it after 100 positions.
  const uint32_t hd = 16;
  KvCache kv(1, 1, hd, {4, 2}, 128, 0);
  std::mt19937 rng(9);
  std::vector<float> key1(hd, 0.f), val1(hd, 0.f);
  key1[3] = 1.f;
  val1[5] = 7.f;
  for (uint32_t pos = 0; pos < 110; ++pos) {
    std::vector<float> k = Randn(hd, rng, 0.05), v = Randn(hd, rng, 0.05);
    if (pos == 1)
      kv.Store(0, 0, pos, key1.data(), val1.data());
    else
      kv.Store(0, 0, pos, k.data(), v.data());
  }
  std::vector<float> q(hd, 0.f), out(hd), scratch(kv.rows() + 16);
  q[3] = 60.f;
  kv.Attend(0, 0, 109, q.data(), 1, out.data(), scratch.data());
  EXPECT_NEAR(out[5], 7.f, 0.05f);
}

TEST(KvCache, MissingKeysAbortInsteadOfReadingStaleRows) {
  KvCache kv(1, 1, 8, {8, 0}, 64, 0);
  std::vector<float> k(8, 1.f), q(8, 1.f), out(8), scratch(64);
  for (uint32_t pos = 0; pos < 30; ++pos) kv.Store(0, 0, pos, k.data(), k.data());
  // Position 10's window (3..10) was overwritten by 30 later rows in an 8-row ring.
  EXPECT_DEATH(kv.Attend(0, 0, 10, q.data(), 1, out.data(), scratch.data()), "not in the cache");
}

TEST(KvCache, AttentionIsBitIdenticalOnEveryIsa) {
  const uint32_t hd = 64, n_q = 2;
  KvCache kv(1, 1, hd, {40, 5}, 200, 8);
  std::mt19937 rng(4);
  for (uint32_t pos = 0; pos < 150; ++pos) {
    std::vector<float> k = Randn(hd, rng), v = Randn(hd, rng);
    kv.Store(0, 0, pos, k.data(), v.data());
  }
  std::vector<float> q = Randn(n_q * hd, rng), scratch(n_q * (kv.rows() + 16));
  const kernels::Isa before = kernels::ActiveIsa();
  std::vector<float> base;
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512,
                           kernels::Isa::kAvx512Vbmi, kernels::Isa::kAmx}) {
    if (!kernels::SetActiveIsa(isa)) continue;
    std::vector<float> out(n_q * hd);
    kv.Attend(0, 0, 149, q.data(), n_q, out.data(), scratch.data());
    if (base.empty()) base = out;
    EXPECT_EQ(0, std::memcmp(base.data(), out.data(), out.size() * 4)) << kernels::IsaName(isa);
  }
  kernels::SetActiveIsa(before);
}

// A block of queries gives Attend's bits for each of them, with and without a window and
// sink, while the ring wraps, on every ISA (the prefill schedule: store the block's keys,
// then attend).
TEST(KvCache, BlockAttentionIsPerPositionAttentionBitForBit) {
  constexpr uint32_t kBlock = kernels::AttentionBlock::kMaxTokens;
  for (auto [window, sink] : {std::pair{8u, 3u}, {8u, 0u}, {5u, 7u}, {0u, 0u}, {40u, 2u}})
    for (uint32_t n_q : {1u, 2u, 3u}) {
      const uint32_t hd = 40, max_seq = 90;
      KvCache kv(1, 1, hd, {window, sink}, max_seq, kBlock - 1);
      std::mt19937 rng(window * 10 + sink + n_q);
      std::vector<float> scratch(kernels::AttendBlockScratch(kv.rows(), n_q));
      const kernels::Isa before = kernels::ActiveIsa();
      for (uint32_t pos0 = 0, nb = 1; pos0 < max_seq; pos0 += nb, nb = nb % kBlock + 1) {
        nb = std::min(nb, max_seq - pos0);
        for (uint32_t t = 0; t < nb; ++t) {
          std::vector<float> k = Randn(hd, rng), v = Randn(hd, rng);
          kv.Store(0, 0, pos0 + t, k.data(), v.data());
        }
        const size_t stride = n_q * hd + 3;
        std::vector<float> q = Randn(nb * stride, rng, 0.7);
        for (kernels::Isa isa :
             {kernels::Isa::kScalar, kernels::Isa::kAvx512Vbmi, kernels::Isa::kAmx}) {
          if (!kernels::SetActiveIsa(isa)) continue;
          std::vector<float> got(nb * stride, -1.f), want(nb * stride, -1.f);
          kv.AttendBlock(0, 0, pos0, nb, q.data(), stride, n_q, got.data(), stride, scratch.data());
          for (uint32_t t = 0; t < nb; ++t)
            kv.Attend(0, 0, pos0 + t, q.data() + t * stride, n_q, want.data() + t * stride,
                      scratch.data());
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
              << "window " << window << " sink " << sink << " n_q " << n_q << " pos0 " << pos0
              << " block " << nb << " " << kernels::IsaName(isa);
        }
        kernels::SetActiveIsa(before);
      }
    }
}

}  // namespace
}  // namespace cact
