// Microbenchmark of the CQ kernels on a needle2-sized layer set (random codes): the
// matrix-vector products of one decoded token (27 layers: q, k, v, gate, out_proj; the mHC
// projections; 2 engram sites' key/value projections; the tied 8192-row logits) and the
// matrix-matrix products of a prefill chunk; then one decoded token's attention (27 layers
// x 4 KV heads, 2 query heads each, 256 visible rows of a 320-row int8 cache, head 64) with
// one-level and two-level queries. Decode and prefill run from the rows and, for the ISAs
// that read them, from the matrices' 16-row tiles. Not a test: run by hand.
//   cact-kernel-bench [--isa all|scalar|avx2|avxvnni|avx512|avx512vbmi|amx] [--threads N]
//                     [--tokens N]
//                     [--two-level 0|1]
//   cact-kernel-bench --version
// --two-level 1 uses the fast path's default numerics (two-level int8 activations, residual
// codebooks for 3/4-bit); 0 (default) plain int8.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops.h"
#include "lib/resources.h"
#include "tools/common/version.h"

using namespace cact::kernels;

namespace {

struct Mat {
  std::vector<uint8_t> blob;
  CqKernelMatrix m;
};

bool g_two_level = false;

Mat MakeMat(uint32_t out, uint32_t in, uint32_t bits, std::mt19937& rng) {
  const uint32_t group = 128;
  const uint64_t codes = uint64_t(out) * in * bits / 8;
  std::vector<uint8_t> blob(codes + uint64_t(out) * (in / group) * 2);
  for (uint64_t i = 0; i < codes; ++i) blob[i] = uint8_t(rng());
  for (uint64_t i = codes; i < blob.size(); i += 2) {  // norms ~ 1.0 in FP16
    blob[i] = uint8_t(rng());
    blob[i + 1] = 0x3C;
  }
  std::vector<float> cb(1u << bits);
  for (size_t k = 0; k < cb.size(); ++k) cb[k] = float(k) - cb.size() / 2.f + 0.5f;
  Int8Codebook cb8 = MakeInt8Codebook(cb, bits, g_two_level && bits != 2).value();
  Mat out_m{std::move(blob), {}};
  out_m.m = CqKernelMatrix::Create(out_m.blob, out, in, group, bits, cb8).value();
  return out_m;
}

// One stage: matrices sharing one prepared input.
struct Stage {
  uint32_t in;
  std::vector<const CqKernelMatrix*> mats;
};

}  // namespace

int main(int argc, char** argv) {
  if (cact::tools::HandleVersionArgument("cact-kernel-bench", argc, argv)) return 0;
  std::string isa_arg = "all";
  int threads = 1;
  uint32_t tokens = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--isa")
      isa_arg = argv[i + 1];
    else if (k == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (k == "--tokens")
      tokens = uint32_t(std::atoi(argv[i + 1]));
    else if (k == "--two-level")
      g_two_level = std::atoi(argv[i + 1]) != 0;
  }
  std::mt19937 rng(1);
  const uint32_t L = 27, d = 512, m = 4;
  std::vector<Mat> mats;
  mats.reserve(L * 5 + 3 + 4 + 1);
  std::vector<Stage> stages;
  Mat phi_pre = MakeMat(L * m, m * d, 4, rng), phi_post = MakeMat(L * m, m * d, 4, rng),
      phi_res = MakeMat(L * m * m, m * d, 4, rng);
  for (uint32_t l = 0; l < L; ++l) {
    size_t b = mats.size();
    mats.push_back(MakeMat(512, d, 2, rng));  // q
    mats.push_back(MakeMat(256, d, 2, rng));  // k
    mats.push_back(MakeMat(256, d, 2, rng));  // v
    mats.push_back(MakeMat(512, d, 2, rng));  // gate
    mats.push_back(MakeMat(d, 512, 2, rng));  // out
    // mHC rows of this layer are row ranges of the shared phi matrices: benchmarked as
    // whole matrices of 24 rows here (same bytes).
    stages.push_back({m * d, {}});
    stages.push_back({d, {&mats[b].m, &mats[b + 1].m, &mats[b + 2].m, &mats[b + 3].m}});
    stages.push_back({512, {&mats[b + 4].m}});
  }
  std::vector<Mat> mhc_layer;
  for (uint32_t l = 0; l < L; ++l) mhc_layer.push_back(MakeMat(24, m * d, 4, rng));
  for (uint32_t l = 0; l < L; ++l) stages[3 * l].mats = {&mhc_layer[l].m};
  Mat ek0 = MakeMat(d, 512, 2, rng), ev0 = MakeMat(d, 512, 2, rng), ek1 = MakeMat(d, 512, 2, rng),
      ev1 = MakeMat(d, 512, 2, rng);
  stages.push_back({512, {&ek0.m, &ev0.m}});
  stages.push_back({512, {&ek1.m, &ev1.m}});
  Mat emb = MakeMat(8192, d, 4, rng);
  stages.push_back({d, {&emb.m}});

  uint64_t code_bytes = 0, macs = 0;
  for (const Stage& s : stages)
    for (const CqKernelMatrix* mm : s.mats) {
      code_bytes += mm->code_bytes();
      macs += uint64_t(mm->out()) * mm->in_pad();
    }
  std::printf("layer set: %zu stages, %.2f MB of codes, %.1f M MACs per token; %d thread(s); %s\n",
              stages.size(), code_bytes / 1e6, macs / 1e6, threads,
              g_two_level ? "two-level int8, residual 4-bit codebooks" : "plain int8");
  const ActPrecision precision = g_two_level ? ActPrecision::kInt8x2 : ActPrecision::kInt8;

  std::vector<Isa> isas;
  for (Isa isa :
       {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAvx512Vbmi, Isa::kAmx})
    if (IsaSupported(isa) && (isa_arg == "all" || isa_arg == IsaName(isa))) isas.push_back(isa);

  std::vector<float> x(size_t(tokens) * m * d);
  for (auto& v : x) v = std::normal_distribution<float>()(rng);
  std::vector<float> y(size_t(tokens) * 8192);
  omp_set_num_threads(threads);
  // The same matrices with their 16-row tiles, for the ISAs whose products read them.
  std::vector<std::unique_ptr<CqKernelMatrix>> tiled_mats;
  std::vector<Stage> tiled_stages = stages;
  bool any_tiles = false;
  for (Stage& s : tiled_stages)
    for (const CqKernelMatrix*& mm : s.mats) {
      auto copy = std::make_unique<CqKernelMatrix>(*mm);
      if (!copy->BuildTiles()) continue;  // a width without tiles: the rows, as before
      mm = copy.get();
      tiled_mats.push_back(std::move(copy));
      any_tiles = true;
    }
  for (Isa isa : isas)
    for (bool tiles : {false, true}) {
      if (tiles && !(any_tiles && ReadsTiles(isa, *tiled_mats[0]))) continue;
      const std::vector<Stage>& stages_run = tiles ? tiled_stages : stages;
      ActivationBatch act;
      // Decode: one persistent parallel region; one thread prepares each stage's input,
      // every thread computes its 16-aligned share of each matrix's rows.
      auto decode = [&](int reps) {
        cact::Stopwatch sw;
#pragma omp parallel num_threads(threads)
        {
          const int nt = omp_get_num_threads(), me = omp_get_thread_num();
          for (int r = 0; r < reps; ++r)
            for (const Stage& s : stages_run) {
#pragma omp single
              PrepareActivations(isa, x.data(), 1, s.in, s.in, 128, &act, precision);
              for (const CqKernelMatrix* mm : s.mats) {
                RowRange rr = RowSplit(mm->out(), nt, me);
                MatVecRows(isa, *mm, act, 0, rr.begin, rr.end, y.data());
              }
#pragma omp barrier
            }
        }
        return sw.Seconds() / reps;
      };
    int reps = isa == Isa::kScalar ? 2 : 50;
    decode(1);
    double best = 1e9;
    for (int i = 0; i < 5; ++i) best = std::min(best, decode(reps));
    // Prefill: `tokens` tokens per stage, MatMat (each panel reused over every token).
    auto prefill = [&](int reps) {
      cact::Stopwatch sw;
      for (int r = 0; r < reps; ++r)
        for (const Stage& s : stages_run) {
          PrepareActivations(isa, x.data(), tokens, s.in, s.in, 128, &act, precision);
#pragma omp parallel num_threads(threads)
          {
            const int nt = omp_get_num_threads(), me = omp_get_thread_num();
            for (const CqKernelMatrix* mm : s.mats) {
              RowRange rr = RowSplit(mm->out(), nt, me);
              MatMatRows(isa, *mm, act, rr.begin, rr.end, y.data(), mm->out());
            }
          }
        }
      return sw.Seconds() / reps;
    };
    int preps = isa == Isa::kScalar ? 1 : 3;
    prefill(1);
    double pbest = 1e9;
    for (int i = 0; i < 3; ++i) pbest = std::min(pbest, prefill(preps));
    std::printf(
        "%-8s %-5s decode %8.3f ms/token  %7.0f tok/s  %6.1f GB/s codes  %6.1f GMAC/s | "
        "prefill(%u) %8.0f tok/s  %6.1f GMAC/s\n",
        IsaName(isa), tiles ? "tiles" : "rows", best * 1e3, 1 / best, code_bytes / best / 1e9,
        macs / best / 1e9, tokens, tokens / pbest, macs * tokens / pbest / 1e9);
    }
  // Attention: each KV head its own cache, so the token reads 27 x 4 heads' rows as decode does.
  const uint32_t heads = L * 4, hd = 64, rows = 320, n_q = 2;
  std::vector<int8_t> keys(size_t(heads) * hd * rows), values(keys.size());
  std::vector<float> key_scale(size_t(heads) * rows), value_scale(key_scale.size());
  for (auto& e : keys) e = int8_t(int(rng() % 255) - 127);
  for (auto& e : values) e = int8_t(int(rng() % 255) - 127);
  for (auto& e : key_scale) e = 0.002f + float(rng() % 1000) * 1e-5f;
  for (auto& e : value_scale) e = 0.01f + float(rng() % 1000) * 1e-5f;
  std::vector<float> out(n_q * hd), scratch(n_q * (rows + 16));
  AttentionRuns runs;  // a wrapped ring: 200 rows from slot 40, then 56 from slot 0
  runs.Add(40, 200);
  runs.Add(0, 56);
  for (Isa isa : isas) {
    if (isa == Isa::kScalar || isa == Isa::kAmx) continue;  // (kAmx: the avx512vbmi ops)
    SetActiveIsa(isa);
    for (ActPrecision query : {ActPrecision::kInt8, ActPrecision::kInt8x2}) {
      double best = 1e9;
      for (int rep = 0; rep < 20; ++rep) {
        cact::Stopwatch sw;
        for (int it = 0; it < 10; ++it)
          for (uint32_t h = 0; h < heads; ++h)
            AttendInt8(runs, &keys[size_t(h) * hd * rows], rows, &key_scale[size_t(h) * rows],
                       &values[size_t(h) * rows * hd], &value_scale[size_t(h) * rows], hd, x.data(),
                       n_q, query, out.data(), scratch.data());
        best = std::min(best, sw.Seconds() / 10);
      }
      std::printf(
          "%-8s attention per token (%u heads x %u queries x 256 rows), %s queries: %.1f us\n",
          IsaName(isa), heads, n_q, query == ActPrecision::kInt8 ? "one-level" : "two-level",
          best * 1e6);
    }
  }
  return 0;
}
