// The fast path's working memory: one struct owning every activation buffer of a forward,
// sized from the geometry, the prefill chunk and the thread count. Sequence state (KV
// cache, engram history, tokens) lives in the forward itself. Internal to
// engine/fast_forward.cc.
//
// Shapes use d = d_model, m = mHC lanes, A = attention dim, K = KV dim, C = prefill chunk,
// L = layers, N = threads.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/kernels/fast_ops.h"
#include "formats/cact/header.h"

namespace cact::fast {

// One token's working vectors, pointing into a TokenBuffers row and the shared outputs.
struct TokenView {
  float *X, *nx;                  // lane state and its rms_unit [m * d]
  float *u, *bx, *h, *out;        // [d]
  float* z;                       // Hadamard MLP scratch [hada_n]
  float *q, *k, *v, *gate;        // [A], [K], [K], [A]
  float* o;                       // attention output [A]
  const float *pre, *post, *res;  // this layer's mHC projections [m], [m], [m * m]
};

// Per-token vectors of n tokens; row t of each at t times its width.
struct TokenBuffers {
  TokenBuffers() = default;
  explicit TokenBuffers(uint32_t n) : n(n) {}
  uint32_t n = 0;
  std::vector<float> X, nx;    // lane state, rms_unit(X) [n][m * d]
  std::vector<float> u, bx;    // pre-mix mean u; the block's stream x (u + engram, ...) [n][d]
  std::vector<float> h;        // ZCN'd attention input, then scratch (post-norm, logits) [n][d]
  std::vector<float> z;        // Hadamard MLP scratch [n][hada_n]
  std::vector<float> q, gate;  // [n][A]
  std::vector<float> k, v;     // [n][K]

  void Allocate(const Geometry& g) {
    const size_t md = size_t(g.mhc_lanes) * g.d_model, d = g.d_model;
    X.resize(n * md);
    nx.resize(n * md);
    u.resize(n * d);
    bx.resize(n * d);
    h.resize(n * d);
    z.resize(n * g.hada_n);
    q.resize(n * g.attn_dim());
    k.resize(n * g.kv_dim());
    v.resize(n * g.kv_dim());
    gate.resize(n * g.attn_dim());
  }
};

struct Activations {
  // `kv_rows`: the rows the KV cache holds per head (the attention scratch's length).
  Activations(const Geometry& geometry, uint32_t chunk_tokens, uint32_t num_threads,
              size_t engram_sites, uint32_t kv_rows)
      : g(geometry), threads(num_threads), sites(engram_sites), priv(threads, TokenBuffers(1)) {
    SetChunk(chunk_tokens);
    mhc_priv.assign(size_t(threads) * MhcStride(), 0.f);
    attn_scratch.resize(size_t(threads) * AttnScratch(kv_rows));
  }

  // Sizes the buffers of chunk rows for `chunk_tokens` tokens (the chunk's per-token
  // buffers again on first use).
  void SetChunk(uint32_t chunk_tokens) {
    const uint32_t C = chunk_tokens, d = g.d_model, A = g.attn_dim();
    chunk = TokenBuffers(C);
    mhc_out.assign(size_t(C) * g.num_layers * MhcRows(), 0.f);
    o.assign(size_t(C) * A, 0.f);
    out.assign(size_t(C) * d, 0.f);
    eng_rows.assign(size_t(std::max(C, threads)) * EngramIn(), 0.f);
    eng_k.assign(sites, std::vector<float>(size_t(C) * d));
    eng_v.assign(size_t(threads) * sites, std::vector<float>(size_t(C) * d));
    eng_vraw.assign(sites, std::vector<float>(size_t(C) * d));
    rope.assign(size_t(C) * g.head_dim, 0.f);
  }

  // The per-token buffers, on first use (a forward that is never fed does not hold them).
  void AllocateTokenBuffers() {
    if (chunk.X.empty()) chunk.Allocate(g);
    for (TokenBuffers& b : priv)
      if (b.X.empty()) b.Allocate(g);
  }

  // Token t of `b` at layer l (the shared outputs o, out and mhc_out at chunk row t).
  TokenView View(TokenBuffers& b, uint32_t t, uint32_t l) {
    const size_t md = size_t(g.mhc_lanes) * g.d_model, d = g.d_model, m = g.mhc_lanes;
    const size_t A = g.attn_dim(), K = g.kv_dim();
    if (b.X.empty()) b.Allocate(g);
    TokenView tv;
    tv.X = &b.X[t * md];
    tv.nx = &b.nx[t * md];
    tv.u = &b.u[t * d];
    tv.bx = &b.bx[t * d];
    tv.h = &b.h[t * d];
    tv.z = &b.z[t * size_t(g.hada_n)];
    tv.q = &b.q[t * A];
    tv.k = &b.k[t * K];
    tv.v = &b.v[t * K];
    tv.gate = &b.gate[t * A];
    tv.o = &o[t * A];
    tv.out = &out[t * d];
    tv.pre = MhcOut(l) + t * MhcStride();  // this layer's rows [pre | post | res]
    tv.post = tv.pre + m;
    tv.res = tv.post + m;
    return tv;
  }

  // Decode's token on thread `me` at layer l: View of its private buffers, with the mHC
  // projections in its own slot (every thread computes all of them, see DecodeLayer).
  TokenView DecodeView(uint32_t me, uint32_t l) {
    TokenView tv = View(priv[me], 0, l);
    tv.pre = MhcPrivate(me, l);
    tv.post = tv.pre + g.mhc_lanes;
    tv.res = tv.post + g.mhc_lanes;
    return tv;
  }
  // Thread me's slots, laid out as one token's of mhc_out (layer l at l * MhcRows()).
  float* MhcPrivate(uint32_t me, uint32_t l) {
    return &mhc_priv[size_t(me) * MhcStride() + size_t(l) * MhcRows()];
  }

  // Attention scratch floats per thread: one token's scores, or a block's (AttendBlock).
  size_t AttnScratch(uint32_t kv_rows) const {
    const uint32_t per_kv = g.num_heads / std::max(1u, g.num_kv_heads);
    return std::max(size_t(per_kv) * (kv_rows + 16), kernels::AttendBlockScratch(kv_rows, per_kv));
  }

  // mhc_out rows per token and layer: pre (m), post (m), res (m * m).
  uint32_t MhcRows() const { return g.mhc_lanes * (g.mhc_lanes + 2); }
  size_t MhcStride() const { return size_t(g.num_layers) * MhcRows(); }  // per token
  float* MhcOut(uint32_t l) { return mhc_out.data() + size_t(l) * MhcRows(); }

  // The engram table rows of one token (the products' input width).
  uint32_t EngramIn() const { return g.num_engram_tables * g.engram_sub_dim; }
  // Decode's private rows of thread `me` (eng_rows has a row per thread as well as per
  // chunk token).
  float* EngramRowsOf(uint32_t me) { return &eng_rows[size_t(me) * EngramIn()]; }

  const Geometry& g;
  uint32_t threads;
  size_t sites;                    // engram sites
  TokenBuffers chunk;              // prefill: the chunk's tokens [C]
  std::vector<TokenBuffers> priv;  // decode: one token per thread [N][1]
  // Shared outputs of split work, row = chunk token.
  std::vector<float> mhc_out;  // mHC projections [C][L][m * (m + 2)]; a layer writes its own slots
  std::vector<float> mhc_priv;  // decode: each thread's mHC projections [N][L][m * (m + 2)]
  std::vector<float> o;        // attention output, gated [C][A]
  std::vector<float> out;      // out_proj output [C][d]
  // Engram memory of the chunk, per site.
  std::vector<float> eng_rows;               // gathered table rows [max(C, N)][T * sub]
  std::vector<std::vector<float>> eng_k;     // keys [site][C][d]
  std::vector<std::vector<float>> eng_v;     // convolved values [site][C][d]; decode [N * sites][d]
  std::vector<std::vector<float>> eng_vraw;  // values before the convolution [site][C][d]
  std::vector<float> rope;                   // cos | sin of the chunk's positions [C][head_dim]
  std::vector<float> attn_scratch;           // per thread: AttnScratch(kv_rows) floats
};

}  // namespace cact::fast
