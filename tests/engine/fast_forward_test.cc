// The fast path (int8 CQ kernels, int8 KV cache, chunked prefill) against the FP32
// reference on both fixtures.
//
// Tolerances (the fast path's accuracy contract): logits relative L2 <= 0.5 % and top-1
// agreement >= 99 %. The fast path's error comes from int8 activations (step = absmax/127
// per 128-group after the rotation: ~0.2-0.4 % relative noise per product, measured in
// tests/kernels), the int8 codebook (<= 0.4 % per level) and the int8 KV cache; these add
// up over 4-5 layers to ~0.1-0.3 % of the logits' norm (measured figures are printed).
// Prefill vs token-by-token decode and every ISA / thread count are compared bit for bit:
// the fast path is designed to be deterministic (fast_forward.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/fast_forward.h"
#include "engine/forward.h"
#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/team.h"
#include "engine_test_util.h"
#include "reliability/micro_model.h"

namespace cact::testing {
namespace {

std::vector<float> FeedAll(Forward& f, const std::vector<int32_t>& tokens) {
  std::vector<float> logits;
  EXPECT_TRUE(f.Feed(tokens, &logits, true).ok());
  return logits;
}

// Top-1 agreement of two [T, V] logit arrays.
double Top1Agreement(const std::vector<float>& a, const std::vector<float>& b, size_t V) {
  size_t T = a.size() / V, same = 0;
  for (size_t t = 0; t < T; ++t) {
    auto ia = std::max_element(a.begin() + t * V, a.begin() + (t + 1) * V) - (a.begin() + t * V);
    auto ib = std::max_element(b.begin() + t * V, b.begin() + (t + 1) * V) - (b.begin() + t * V);
    same += ia == ib;
  }
  return double(same) / double(T);
}

// Fraction of positions whose top-1 differs only where the reference's top two logits are
// within `margin` (a near tie the int8 path may legitimately flip).
struct Top1Stats {
  double agree;
  size_t disagree_clear;
};
Top1Stats Top1(const std::vector<float>& fast, const std::vector<float>& ref, size_t V,
               double margin) {
  size_t T = ref.size() / V, same = 0, clear = 0;
  for (size_t t = 0; t < T; ++t) {
    const float* r = &ref[t * V];
    const float* f = &fast[t * V];
    size_t ir = std::max_element(r, r + V) - r, jf = std::max_element(f, f + V) - f;
    if (ir == jf) {
      ++same;
      continue;
    }
    if (r[ir] - r[jf] > margin) ++clear;
  }
  return {double(same) / double(T), clear};
}

std::vector<int32_t> RandomTokens(size_t n, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  t[0] = 2;
  for (size_t i = 1; i < n; ++i) t[i] = int32_t(rng() % vocab);
  return t;
}

TEST(FastForward, MatchesReferenceOnFixtureSequences) {
  for (const std::string& k : FixtureCases()) {
    const Model& model = FixtureModel(k);
    for (const char* seq : {"s0", "s1", "s2"}) {
      const std::vector<int32_t> tokens = FixtureTokens(k, seq);
      auto ref = MakeReferenceForward(model, {});
      auto fast = MakeFastForward(model, {});
      std::vector<float> lr = FeedAll(*ref, tokens), lf = FeedAll(*fast, tokens);
      const double rel = RelL2(lf, lr);
      const double top1 = Top1Agreement(lf, lr, model.vocab());
      std::printf("  %s %s (%zu tokens): logits rel-L2 %.4f%%, top-1 agreement %.1f%%\n", k.c_str(),
                  seq, tokens.size(), 100 * rel, 100 * top1);
      EXPECT_LE(rel, 0.005) << k << " " << seq;
      EXPECT_GE(top1, 0.99 - 1.0 / tokens.size()) << k << " " << seq;
      // And against the official decode directly.
      NpyArray want = LoadNpy(Fixture(k, std::string("logits_") + seq + ".npy"));
      EXPECT_LE(RelL2(lf, want.data), 0.005) << k << " " << seq << " vs official";
    }
  }
}

TEST(FastForward, MatchesReferenceWithWindowAndSinkOnFixture) {
  for (const std::string& k : FixtureCases()) {
    const Model& model = FixtureModel(k);
    const std::vector<int32_t> tokens = FixtureTokens(k, "s2");
    for (auto [w, p] : {std::pair{16u, 4u}, {16u, 0u}, {8u, 2u}}) {
      ForwardOptions opt;
      opt.attn = {w, p};
      auto fast = MakeFastForward(model, opt);
      std::vector<float> lf = FeedAll(*fast, tokens);
      NpyArray want =
          LoadNpy(Fixture(k, "logits_s2_w" + std::to_string(w) + "p" + std::to_string(p) + ".npy"));
      const double rel = RelL2(lf, want.data);
      std::printf("  %s s2 window %u sink %u: rel-L2 vs official %.4f%%\n", k.c_str(), w, p,
                  100 * rel);
      EXPECT_LE(rel, 0.005) << k << " w" << w << " p" << p;
    }
  }
}

// >= 256 decode steps on sequences far longer than the window (the ring wraps many times;
// the pinned rows must stay visible): teacher-forced with the reference's own greedy
// tokens, one token per Feed for the fast path. The fixtures' max_seq_len is 256, so the
// steps come from two sessions of 8 prompt tokens + 240 decode steps.
TEST(FastForward, LongGreedyDecodeWithSmallWindowAgreesWithReference) {
  for (const std::string& k : FixtureCases()) {
    const Model& model = FixtureModel(k);
    ForwardOptions opt;
    opt.attn = {16, 4};
    const size_t V = model.vocab();
    const size_t steps = std::min<size_t>(240, model.max_seq_len() - 8);
    std::vector<float> all_ref, all_fast;
    size_t total_steps = 0;
    for (uint32_t session = 0; session < 2; ++session) {
      auto ref = MakeReferenceForward(model, opt);
      std::vector<int32_t> prompt = RandomTokens(8, model.vocab(), 7 + session);
      std::vector<float> lr;
      ASSERT_TRUE(ref->Feed(prompt, &lr, false).ok());
      std::vector<int32_t> seq;
      std::vector<float> ref_steps;
      // Greedy on random weights falls into loops: every 16th step takes a random token
      // instead, keeping the context varied.
      std::mt19937 rng(3 + session);
      for (size_t s = 0; s < steps; ++s) {
        int32_t next = int32_t(std::max_element(lr.begin(), lr.end()) - lr.begin());
        if (s % 16 == 15) next = int32_t(rng() % V);
        seq.push_back(next);
        ASSERT_TRUE(ref->Feed(std::span<const int32_t>(&next, 1), &lr, false).ok());
        ref_steps.insert(ref_steps.end(), lr.begin(), lr.end());
      }
      auto fast = MakeFastForward(model, opt);
      std::vector<float> lf;
      ASSERT_TRUE(fast->Feed(prompt, &lf, false).ok());
      for (int32_t tok : seq) {
        ASSERT_TRUE(fast->Feed(std::span<const int32_t>(&tok, 1), &lf, false).ok());
        all_fast.insert(all_fast.end(), lf.begin(), lf.end());
      }
      all_ref.insert(all_ref.end(), ref_steps.begin(), ref_steps.end());
      total_steps += steps;
    }
    ASSERT_EQ(all_fast.size(), all_ref.size());
    ASSERT_GE(total_steps, 256u);
    const double rel = RelL2(all_fast, all_ref);
    // Near ties (top two reference logits within 1 % of the logits' std) may flip.
    Top1Stats t1 = Top1(all_fast, all_ref, V, 0.01 * StdDev(all_ref));
    std::printf(
        "  %s: %zu decode steps (window 16, sink 4): rel-L2 %.4f%%, top-1 %.2f%%, "
        "clear disagreements %zu\n",
        k.c_str(), total_steps, 100 * rel, 100 * t1.agree, t1.disagree_clear);
    EXPECT_LE(rel, 0.005);
    EXPECT_GE(t1.agree, 0.99);
    EXPECT_EQ(t1.disagree_clear, 0u);
  }
}

TEST(FastForward, PrefillEqualsTokenByTokenBitForBit) {
  for (const std::string& k : FixtureCases()) {
    const Model& model = FixtureModel(k);
    ForwardOptions opt;
    opt.attn = {16, 4};
    // 150 tokens with every position's logits: three prefill chunks (64 + 64 + 22), the
    // ring wraps inside a chunk and inside an attention block.
    const std::vector<int32_t> tokens = RandomTokens(150, model.vocab(), 11);
    auto a = MakeFastForward(model, opt);
    std::vector<float> la = FeedAll(*a, tokens);
    auto b = MakeFastForward(model, opt);
    std::vector<float> lb;
    for (int32_t t : tokens) {
      std::vector<float> step;
      ASSERT_TRUE(b->Feed(std::span<const int32_t>(&t, 1), &step, true).ok());
      lb.insert(lb.end(), step.begin(), step.end());
    }
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4))
        << k << ": max diff " << MaxAbsDiff(la, lb);
    // Uneven splits: 1 + 70 + 79.
    auto c = MakeFastForward(model, opt);
    std::vector<float> lc, part;
    ASSERT_TRUE(c->Feed(std::span<const int32_t>(tokens.data(), 1), &part, true).ok());
    lc = part;
    ASSERT_TRUE(c->Feed(std::span<const int32_t>(tokens.data() + 1, 70), &part, true).ok());
    lc.insert(lc.end(), part.begin(), part.end());
    ASSERT_TRUE(c->Feed(std::span<const int32_t>(tokens.data() + 71, 79), &part, true).ok());
    lc.insert(lc.end(), part.begin(), part.end());
    EXPECT_EQ(0, std::memcmp(la.data(), lc.data(), la.size() * 4)) << k;
    // Last position only: chunks of 16 (kFastPrefillChunk), the same last row.
    auto d = MakeFastForward(model, opt);
    std::vector<float> ld;
    ASSERT_TRUE(d->Feed(tokens, &ld, false).ok());
    ASSERT_EQ(ld.size(), size_t(model.vocab()));
    EXPECT_EQ(0, std::memcmp(la.data() + la.size() - ld.size(), ld.data(), ld.size() * 4)) << k;
  }
}

TEST(FastForward, IdenticalOnEveryIsaAndThreadCount) {
  const Model& model = FixtureModel("odd");
  const std::vector<int32_t> tokens = FixtureTokens("odd", "s2");
  const kernels::Isa before = kernels::ActiveIsa();
  std::vector<float> base;
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvxVnni,
                           kernels::Isa::kAvx512, kernels::Isa::kAvx512Vbmi, kernels::Isa::kAmx}) {
    if (!kernels::SetActiveIsa(isa)) continue;
    for (bool tiles : {true, false})
      for (int threads : {1, 2, 3}) {
        ForwardOptions opt;
        opt.threads = threads;
        FastForwardOptions fast;
        fast.code_tiles = tiles;
        auto f = MakeFastForward(model, opt, fast);
        std::vector<float> l = FeedAll(*f, tokens);
        if (base.empty()) base = l;
        EXPECT_EQ(0, std::memcmp(base.data(), l.data(), l.size() * 4))
            << kernels::IsaName(isa) << " threads " << threads << (tiles ? " tiles" : " rows");
      }
  }
  kernels::SetActiveIsa(before);
}

// Two threads with one partner lagging 300 us after every barrier (kernels::Team's test
// hook; each member in turn) give one thread's bits, in prefill and decode. The lag lets
// the other thread run ahead into the next phase, so a buffer that one phase writes while
// a partner may still read it from the previous phase (ordered by no barrier) changes the
// logits. (It caught the stacked mHC outputs shared by all layers: decode has no barrier
// between a layer's PostMix and the next layer's mHC products. ThreadSanitizer does not:
// the kernels store through vector intrinsics, which it does not instrument.)
// The micro model (its CQ records cycle through widths and groups, so the three mHC
// projections run separately) and the fixtures (one stacked product).
struct LagModels {
  TempDir dir;
  std::unique_ptr<Model> micro;
  std::vector<std::pair<std::string, const Model*>> all;
};
void OpenLagModels(LagModels* m) {
  ASSERT_TRUE(
      WriteCact(m->dir / "micro.cact", reliability::MicroContents(reliability::MicroGeometry()), 0)
          .ok());
  auto micro = Model::Open(m->dir / "micro.cact");
  ASSERT_TRUE(micro.ok()) << micro.status();
  m->micro = std::move(micro).value();
  m->all = {{"micro", m->micro.get()}};
  for (const std::string& k : FixtureCases()) m->all.push_back({k, &FixtureModel(k)});
}

// Logits of a 20-token prefill (all positions) then token-by-token decode of the rest,
// window 16 + sink 4.
std::vector<float> PrefillThenDecode(const Model& model, const std::vector<int32_t>& tokens,
                                     int threads) {
  ForwardOptions opt;
  opt.threads = threads;
  opt.attn = {16, 4};
  auto f = MakeFastForward(model, opt);
  std::vector<float> all, step;
  EXPECT_TRUE(f->Feed(std::span<const int32_t>(tokens.data(), 20), &all, true).ok());
  for (size_t i = 20; i < tokens.size(); ++i) {
    EXPECT_TRUE(f->Feed(std::span<const int32_t>(&tokens[i], 1), &step, false).ok());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

// `threads` members, each of `lagging` in turn sleeping after its barriers, give the
// one-thread bits.
void ExpectOneThreadsBitsWithLaggingMembers(int threads, std::initializer_list<uint32_t> lagging) {
  LagModels models;
  ASSERT_NO_FATAL_FAILURE(OpenLagModels(&models));
  for (const auto& [k, model_ptr] : models.all) {
    const Model& model = *model_ptr;
    const std::vector<int32_t> tokens = RandomTokens(40, model.vocab(), 21);
    const std::vector<float> one = PrefillThenDecode(model, tokens, 1);
    for (uint32_t lag : lagging) {
      kernels::Team::SetLagForTesting(lag, std::chrono::microseconds(300));
      const std::vector<float> many = PrefillThenDecode(model, tokens, threads);
      kernels::Team::SetLagForTesting(0, std::chrono::microseconds(0));
      ASSERT_EQ(one.size(), many.size());
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * 4))
          << k << ", " << threads << " threads, member " << lag << " lagging: max diff "
          << MaxAbsDiff(one, many);
    }
  }
}

TEST(FastForward, TwoThreadsWithALaggingPartnerGiveOneThreadsBits) {
  ExpectOneThreadsBitsWithLaggingMembers(2, {1u, 0u});
}

// The team's solo fallback (every third run on the caller alone, kernels::Team) changes
// the member count from one token to the next: every job must give one thread's bits on
// either count.
TEST(FastForward, SoloRunsOfATwoThreadTeamGiveOneThreadsBits) {
  LagModels models;
  ASSERT_NO_FATAL_FAILURE(OpenLagModels(&models));
  for (const auto& [k, model_ptr] : models.all) {
    const std::vector<int32_t> tokens = RandomTokens(40, model_ptr->vocab(), 22);
    const std::vector<float> one = PrefillThenDecode(*model_ptr, tokens, 1);
    kernels::Team::SetSoloPeriodForTesting(3);
    const std::vector<float> two = PrefillThenDecode(*model_ptr, tokens, 2);
    kernels::Team::SetSoloPeriodForTesting(0);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4))
        << k << ": max diff " << MaxAbsDiff(one, two);
  }
}

// More members than prefill chunk tokens: decode's private engram rows are per thread
// (member 16 must not share member 0's).
TEST(FastForward, TwentyThreadsWithALaggingMemberGiveOneThreadsBits) {
  ExpectOneThreadsBitsWithLaggingMembers(20, {16u, 0u});
}

TEST(FastForward, HiddenStatesTrackTheReference) {
  for (const std::string& k : FixtureCases()) {
    const Model& model = FixtureModel(k);
    ForwardOptions opt;
    opt.keep_hidden = true;
    const std::vector<int32_t> tokens = FixtureTokens(k, "s2");
    auto ref = MakeReferenceForward(model, opt);
    auto fast = MakeFastForward(model, opt);
    FeedAll(*ref, tokens);
    FeedAll(*fast, tokens);
    ASSERT_EQ(fast->hidden().size(), ref->hidden().size());
    const double rel = RelL2(fast->hidden(), ref->hidden());
    std::printf("  %s hidden states rel-L2 %.4f%%\n", k.c_str(), 100 * rel);
    EXPECT_LE(rel, 0.005);
  }
}

TEST(FastForward, BadInputLeavesStateUnchanged) {
  const Model& model = FixtureModel("tiny");
  auto f = MakeFastForward(model, {});
  std::vector<int32_t> ok = {2, 10, 20};
  std::vector<float> l1, l2;
  ASSERT_TRUE(f->Feed(ok, &l1, false).ok());
  std::vector<int32_t> bad = {5, int32_t(model.vocab())};
  EXPECT_FALSE(f->Feed(bad, &l2, false).ok());
  std::vector<int32_t> neg = {-1};
  EXPECT_FALSE(f->Feed(neg, &l2, false).ok());
  EXPECT_EQ(f->position(), 3u);
  std::vector<int32_t> too_long(model.max_seq_len(), 1);
  EXPECT_FALSE(f->Feed(too_long, &l2, false).ok());
  EXPECT_EQ(f->position(), 3u);
  f->Reset();
  EXPECT_EQ(f->position(), 0u);
  ASSERT_TRUE(f->Feed(ok, &l2, false).ok());
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * 4)) << "Reset restores the start";
}

}  // namespace
}  // namespace cact::testing
