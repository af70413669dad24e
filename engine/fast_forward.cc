// Fast forward path (see fast_forward.h). One chunk of tokens runs inside one OpenMP
// parallel region: per-token work is shared out by token, matrix products by 16-row
// blocks, attention by KV head.
#include "engine/fast_forward.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops.h"
#include "engine/kv_cache.h"
#include "engine/ops.h"

namespace cact {
namespace {

namespace kn = kernels;

// Rows [begin, end) of a matrix range split into `parts` pieces on 16-row boundaries
// (relative to the matrix, so the kernels use the aligned norm panels).
kn::RowRange SplitRange(uint32_t begin, uint32_t end, uint32_t parts, uint32_t part) {
  const uint32_t first = begin / 16, last = (end + 15) / 16;
  const uint32_t blocks = last - first;
  const uint32_t b0 = first + uint32_t(uint64_t(blocks) * part / parts);
  const uint32_t b1 = first + uint32_t(uint64_t(blocks) * (part + 1) / parts);
  return {std::clamp(b0 * 16, begin, end), std::clamp(b1 * 16, begin, end)};
}

// A weight matrix for the fast path: CQ records use the int8 kernels straight from the
// mapped blob; other dtypes (legal, unused by the exporter) fall back to a dense copy.
class FastMatrix {
 public:
  FastMatrix() = default;
  FastMatrix(const MatrixView& v, bool codebook_residual) : rows_(v.rows), cols_(v.cols) {
    if (v.is_cq()) {
      const bool residual = codebook_residual && (v.cq.bits == 3 || v.cq.bits == 4);
      auto cb = kn::MakeInt8Codebook(v.codebook, v.cq.bits, residual);
      if (cb.ok()) {
        auto m = kn::CqKernelMatrix::Create(v.blob.first(v.cq.blob_bytes()), v.rows, v.cols,
                                            v.cq.group, v.cq.bits, *cb);
        if (m.ok()) {
          cq_.emplace(std::move(m).value());
          return;
        }
      }
    }
    dense_ = v.Dequantize();
  }
  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  // The activation group this matrix consumes (0: dense, reads the raw input).
  uint32_t group() const { return cq_ ? cq_->group() : 0; }

  // y[t * y_stride + r] = row r . x_t for tokens t < n and rows [rb, re). CQ matrices read
  // the prepared batch `act` (its group), dense ones the raw x.
  void Apply(const float* x, size_t x_stride, const kn::ActivationBatch* act, uint32_t n,
             uint32_t rb, uint32_t re, float* y, size_t y_stride) const {
    if (rb >= re) return;
    if (cq_) {
      if (n == 1) kn::MatVecRows(*cq_, *act, 0, rb, re, y);
      else kn::MatMatRows(*cq_, *act, rb, re, y, y_stride);
      return;
    }
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t r = rb; r < re; ++r)
        y[t * y_stride + r] = ops::Dot(&dense_[size_t(r) * cols_], x + t * x_stride, cols_);
  }

 private:
  uint32_t rows_ = 0, cols_ = 0;
  std::optional<kn::CqKernelMatrix> cq_;
  std::vector<float> dense_;
};

// One input vector (per token) shared by several matrices: prepared once per distinct
// activation group among its consumers.
class SharedInput {
 public:
  void SetPrecision(kn::ActPrecision p) { precision_ = p; }
  void AddConsumer(const FastMatrix& m) {
    if (m.group() && std::find(groups_.begin(), groups_.end(), m.group()) == groups_.end()) {
      groups_.push_back(m.group());
      batches_.emplace_back();
    }
  }
  // Call from one thread; x holds n rows of `in` floats with stride x_stride.
  void Prepare(const float* x, uint32_t n, size_t x_stride, uint32_t in) {
    x_ = x;
    stride_ = x_stride;
    for (size_t i = 0; i < groups_.size(); ++i)
      kn::PrepareActivations(x, n, x_stride, in, groups_[i], &batches_[i], precision_);
  }
  void Apply(const FastMatrix& m, uint32_t n, uint32_t rb, uint32_t re, float* y,
             size_t y_stride) const {
    const kn::ActivationBatch* act = nullptr;
    for (size_t i = 0; i < groups_.size(); ++i)
      if (groups_[i] == m.group()) act = &batches_[i];
    m.Apply(x_, stride_, act, n, rb, re, y, y_stride);
  }

 private:
  std::vector<uint32_t> groups_;
  std::vector<kn::ActivationBatch> batches_;
  const float* x_ = nullptr;
  size_t stride_ = 0;
  kn::ActPrecision precision_ = kn::ActPrecision::kInt8x2;
};

struct FastLayer {
  FastMatrix q, k, v, gate, out;
};

struct FastEngramSite {
  FastMatrix key, value;
};

// Sinkhorn in the exponential domain (double): P = exp(A - max A), then 20 times
// normalise rows then columns: the same iteration as the log-space version (subtracting a
// logsumexp is dividing by a sum). Falls back to the log-space one if the spread of A is
// so large that exp would underflow in double.
void SinkhornFast(float* a, uint32_t m) {
  float mx = a[0], mn = a[0];
  for (uint32_t i = 1; i < m * m; ++i) {
    mx = std::max(mx, a[i]);
    mn = std::min(mn, a[i]);
  }
  if (!(mx - mn < 600.f) || m > 8) {
    ops::SinkhornLog(a, m);
    return;
  }
  double p[64];
  for (uint32_t i = 0; i < m * m; ++i) p[i] = std::exp(double(a[i]) - double(mx));
  for (int it = 0; it < ops::kSinkhornIters; ++it) {
    for (uint32_t i = 0; i < m; ++i) {
      double s = 0;
      for (uint32_t j = 0; j < m; ++j) s += p[i * m + j];
      const double inv = 1.0 / s;
      for (uint32_t j = 0; j < m; ++j) p[i * m + j] *= inv;
    }
    for (uint32_t j = 0; j < m; ++j) {
      double s = 0;
      for (uint32_t i = 0; i < m; ++i) s += p[i * m + j];
      const double inv = 1.0 / s;
      for (uint32_t i = 0; i < m; ++i) p[i * m + j] *= inv;
    }
  }
  for (uint32_t i = 0; i < m * m; ++i) a[i] = float(p[i]);
}

class FastForward final : public Forward {
 public:
  FastForward(const Model& model, const ForwardOptions& options, const FastForwardOptions& fast)
      : m_(model), g_(model.geometry()), opt_(options),
        kv_(g_.num_layers, g_.num_kv_heads, g_.head_dim, options.attn, g_.max_seq_len,
            kFastPrefillChunk) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const bool lo = fast.codebook_residual;
    embedding_ = FastMatrix(model.embedding(), lo);
    for (const LayerWeights& lw : model.layers()) {
      FastLayer fl{FastMatrix(lw.q_proj, lo), FastMatrix(lw.k_proj, lo), FastMatrix(lw.v_proj, lo),
                   FastMatrix(lw.gate_proj, lo), FastMatrix(lw.out_proj, lo)};
      layers_.push_back(std::move(fl));
    }
    phi_pre_ = FastMatrix(model.mhc().phi_pre, lo);
    phi_post_ = FastMatrix(model.mhc().phi_post, lo);
    phi_res_ = FastMatrix(model.mhc().phi_res, lo);
    for (const EngramSiteWeights& es : model.engram_sites())
      engram_.push_back({FastMatrix(es.key_proj, lo), FastMatrix(es.value_proj, lo)});
    const kn::ActPrecision precision =
        fast.two_level_activations ? kn::ActPrecision::kInt8x2 : kn::ActPrecision::kInt8;
    for (SharedInput* in : {&in_mhc_, &in_attn_, &in_out_, &in_engram_, &in_logits_})
      in->SetPrecision(precision);

    in_mhc_.AddConsumer(phi_pre_);
    in_mhc_.AddConsumer(phi_post_);
    in_mhc_.AddConsumer(phi_res_);
    for (const FastLayer& fl : layers_) {
      for (const FastMatrix* mm : {&fl.q, &fl.k, &fl.v, &fl.gate}) in_attn_.AddConsumer(*mm);
      in_out_.AddConsumer(fl.out);
    }
    for (const FastEngramSite& es : engram_) {
      in_engram_.AddConsumer(es.key);
      in_engram_.AddConsumer(es.value);
    }
    in_logits_.AddConsumer(embedding_);

    inv_freq_ = ops::RopeInvFreq(g_.head_dim, g_.rope_theta);
    hist_len_ = (g_.engram_conv_taps > 0 ? (g_.engram_conv_taps - 1) * g_.engram_conv_dilation : 0) + 1;
    threads_ = std::max(1, options.threads);

    const uint32_t C = kFastPrefillChunk, A = g_.attn_dim(), K = g_.kv_dim();
    X_.resize(size_t(C) * m * d);
    nx_.resize(size_t(C) * m * d);
    pre_.resize(size_t(C) * phi_pre_.rows());
    post_.resize(size_t(C) * phi_post_.rows());
    res_.resize(size_t(C) * phi_res_.rows());
    u_.resize(size_t(C) * d);
    bx_.resize(size_t(C) * d);
    h_.resize(size_t(C) * d);
    q_.resize(size_t(C) * A);
    k_.resize(size_t(C) * K);
    v_.resize(size_t(C) * K);
    gate_.resize(size_t(C) * A);
    o_.resize(size_t(C) * A);
    out_.resize(size_t(C) * d);
    y_.resize(size_t(C) * d);
    eng_rows_.resize(size_t(C) * g_.num_engram_tables * g_.engram_sub_dim);
    eng_k_.assign(engram_.size(), std::vector<float>(size_t(C) * d));
    eng_v_.assign(engram_.size(), std::vector<float>(size_t(C) * d));
    eng_vraw_.resize(size_t(C) * d);
    rope_.resize(size_t(C) * g_.head_dim);
    attn_scratch_.resize(size_t(threads_) * (g_.num_heads / std::max(1u, g_.num_kv_heads)) *
                         (kv_.rows() + 16));
    mlp_.resize(size_t(C) * g_.hada_n);
    Reset();
  }

  void Reset() override {
    tokens_.clear();
    kv_.Reset();
    eng_hist_.assign(engram_.size(), std::vector<float>(size_t(hist_len_) * g_.d_model, 0.f));
    hidden_tld_.clear();
    hidden_ltd_.clear();
  }

  absl::Status Feed(std::span<const int32_t> tokens, std::vector<float>* logits,
                    bool all_positions) override {
    if (auto st = CheckFeed(m_, position(), tokens); !st.ok()) return st;
    const size_t n = tokens.size(), V = g_.vocab;
    if (logits) logits->assign((all_positions ? n : (n ? 1 : 0)) * V, 0.0f);
    for (size_t i = 0; i < n; i += kFastPrefillChunk) {
      const uint32_t cn = uint32_t(std::min<size_t>(kFastPrefillChunk, n - i));
      const uint32_t p0 = position();
      tokens_.insert(tokens_.end(), tokens.begin() + i, tokens.begin() + i + cn);
      // Logits for every token of the chunk, or only for the very last token.
      float* out = nullptr;
      uint32_t first = cn;
      if (logits && all_positions) {
        out = logits->data() + i * V;
        first = 0;
      } else if (logits && i + cn == n) {
        out = logits->data();
        first = cn - 1;
      }
      RunChunk(p0, cn, first, out);
    }
    return absl::OkStatus();
  }

  uint32_t position() const override { return uint32_t(tokens_.size()); }

  const std::vector<float>& hidden() const override {
    const size_t T = tokens_.size(), L = g_.num_layers, d = g_.d_model;
    if (hidden_ltd_.size() != hidden_tld_.size()) {
      hidden_ltd_.resize(hidden_tld_.size());
      for (size_t t = 0; t < T; ++t)
        for (size_t l = 0; l < L; ++l)
          std::memcpy(&hidden_ltd_[(l * T + t) * d], &hidden_tld_[(t * L + l) * d], d * sizeof(float));
    }
    return hidden_ltd_;
  }

  std::string name() const override { return "fast"; }

 private:
  // Tokens p0 .. p0+n-1 (already appended to tokens_); logits of chunk tokens >= first go
  // to `logits` (row t - first), if not null.
  void RunChunk(uint32_t p0, uint32_t n, uint32_t first, float* logits) {
    const uint32_t L = g_.num_layers;
    if (opt_.keep_hidden) hidden_tld_.resize(size_t(p0 + n) * L * g_.d_model);
#pragma omp parallel num_threads(threads_)
    {
      const uint32_t me = omp_get_thread_num(), nt = omp_get_num_threads();
      Embed(p0, n);
      for (size_t s = 0; s < engram_.size(); ++s) EngramMemory(s, p0, n, me, nt);
      for (uint32_t l = 0; l < L; ++l) Layer(l, p0, n, me, nt);
      if (logits) Logits(n, first, logits, me, nt);
    }
  }

  // Products of one shared input for tokens < n, split over the team.
  void Products(const SharedInput& in, const FastMatrix& mat, uint32_t rb, uint32_t re,
                uint32_t n, float* y, uint32_t me, uint32_t nt) {
    kn::RowRange r = SplitRange(rb, re, nt, me);
    in.Apply(mat, n, r.begin, r.end, y, mat.rows());
  }

  void Embed(uint32_t p0, uint32_t n) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const float scale = std::sqrt(float(d));
#pragma omp for schedule(static)
    for (uint32_t t = 0; t < n; ++t) {
      float* x = &X_[size_t(t) * m * d];
      m_.embedding().DequantizeRow(uint32_t(tokens_[p0 + t]), x);
      for (uint32_t c = 0; c < d; ++c) x[c] *= scale;
      for (uint32_t j = 1; j < m; ++j) std::memcpy(x + j * d, x, d * sizeof(float));
    }
  }

  // Engram key and convolved value of site s for the chunk's tokens.
  void EngramMemory(size_t s, uint32_t p0, uint32_t n, uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model, T = g_.num_engram_tables, S = g_.engram_slots,
                   sub = g_.engram_sub_dim, hpo = g_.heads_per_order(), in = T * sub;
    const MatrixView& tables = m_.engram_sites()[s].tables;
#pragma omp for schedule(static)
    for (uint32_t t = 0; t < n; ++t) {
      float* rows = &eng_rows_[size_t(t) * in];
      const uint32_t pos = p0 + t;
      for (uint32_t table = 0; table < T; ++table) {
        const uint32_t order = g_.engram_orders[table / hpo];
        float* row = rows + size_t(table) * sub;
        if (pos + 1 < order) {
          std::fill(row, row + sub, 0.f);
          continue;
        }
        const uint32_t slot = ops::EngramSlot(table, order, tokens_, pos, S);
        tables.DequantizeRow(table * S + slot, row);
      }
    }
#pragma omp single
    in_engram_.Prepare(eng_rows_.data(), n, in, in);
    Products(in_engram_, engram_[s].key, 0, d, n, eng_k_[s].data(), me, nt);
    Products(in_engram_, engram_[s].value, 0, d, n, eng_vraw_.data(), me, nt);
#pragma omp barrier
#pragma omp single
    {
      // Causal depthwise convolution v'[t] = sum_j taps[j] * v[t - dil * j]: earlier
      // positions come from the history ring (the last hist_len_ raw values).
      const std::vector<float>& taps = m_.engram_sites()[s].taps;
      const uint32_t dil = g_.engram_conv_dilation;
      std::vector<float>& hist = eng_hist_[s];
      for (uint32_t t = 0; t < n; ++t) {
        const uint32_t pos = p0 + t;
        float* out = &eng_v_[s][size_t(t) * d];
        std::fill(out, out + d, 0.f);
        for (uint32_t j = 0; j < g_.engram_conv_taps; ++j) {
          if (uint64_t(j) * dil > pos) break;
          const uint32_t src = pos - j * dil;
          const float* vj = src >= p0 ? &eng_vraw_[size_t(src - p0) * d]
                                      : &hist[size_t(src % hist_len_) * d];
          for (uint32_t c = 0; c < d; ++c) out[c] += taps[size_t(j) * d + c] * vj[c];
        }
      }
      for (uint32_t t = n > hist_len_ ? n - hist_len_ : 0; t < n; ++t)
        std::memcpy(&hist[size_t((p0 + t) % hist_len_) * d], &eng_vraw_[size_t(t) * d], d * sizeof(float));
    }
  }

  void Layer(uint32_t l, uint32_t p0, uint32_t n, uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes, md = m * d;
    const uint32_t A = g_.attn_dim(), K = g_.kv_dim(), hd = g_.head_dim;
    const uint32_t H = g_.num_heads, KVH = g_.num_kv_heads, per_kv = H / KVH;
    const MhcWeights& mhc = m_.mhc();
    const LayerWeights& lw = m_.layer(l);
    const FastLayer& fl = layers_[l];
    const uint32_t selected = l % m;

    // nx = rms_unit(flatten(X)) and the layer's mHC projections.
#pragma omp for schedule(static)
    for (uint32_t t = 0; t < n; ++t) ops::RmsUnit(&X_[size_t(t) * md], md, &nx_[size_t(t) * md]);
#pragma omp single
    in_mhc_.Prepare(nx_.data(), n, md, md);
    Products(in_mhc_, phi_pre_, l * m, l * m + m, n, pre_.data(), me, nt);
    Products(in_mhc_, phi_post_, l * m, l * m + m, n, post_.data(), me, nt);
    Products(in_mhc_, phi_res_, l * m * m, (l + 1) * m * m, n, res_.data(), me, nt);
#pragma omp barrier

    // u = sum_j h_pre[j] X[j]; engram injection; h = ZCN(bx, norm_in).
    const int site = lw.engram_site;
#pragma omp for schedule(static)
    for (uint32_t t = 0; t < n; ++t) {
      const float* X = &X_[size_t(t) * md];
      const float* pre = &pre_[size_t(t) * phi_pre_.rows() + l * m];
      float* u = &u_[size_t(t) * d];
      float hp[16];
      for (uint32_t j = 0; j < m; ++j) {
        const float off = j == selected ? 4.0f : -4.0f;
        hp[j] = mhc.a_pre[l] * pre[j] + mhc.b_pre[l * m + j] + off;
      }
      kn::SigmoidInPlace(hp, m);
      std::fill(u, u + d, 0.f);
      for (uint32_t j = 0; j < m; ++j)
        for (uint32_t c = 0; c < d; ++c) u[c] += hp[j] * X[j * d + c];
      float* bx = &bx_[size_t(t) * d];
      std::memcpy(bx, u, d * sizeof(float));
      if (site >= 0) {
        const float* ek = &eng_k_[site][size_t(t) * d];
        const float* ev = &eng_v_[site][size_t(t) * d];
        // rms_unit(u) and rms_unit(k) into h (free until written below) and y-sized scratch.
        float* nu = &h_[size_t(t) * d];
        std::vector<float> nk(d);
        ops::RmsUnit(u, d, nu);
        ops::RmsUnit(ek, d, nk.data());
        float alpha = ops::Dot(nu, nk.data(), d) / std::sqrt(float(d));
        kn::SigmoidInPlace(&alpha, 1);
        for (uint32_t c = 0; c < d; ++c) bx[c] = u[c] + alpha * ev[c];
      }
      ops::Zcn(bx, lw.norm_in.data(), d, &h_[size_t(t) * d]);
    }
#pragma omp single
    in_attn_.Prepare(h_.data(), n, d, d);
    Products(in_attn_, fl.q, 0, A, n, q_.data(), me, nt);
    Products(in_attn_, fl.k, 0, K, n, k_.data(), me, nt);
    Products(in_attn_, fl.v, 0, K, n, v_.data(), me, nt);
    Products(in_attn_, fl.gate, 0, A, n, gate_.data(), me, nt);
#pragma omp barrier

    // RoPE angles of the chunk's positions (every thread needs them; computed by one).
#pragma omp single
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t i = 0; i < hd / 2; ++i) {
        const float angle = float(p0 + t) * inv_freq_[i];
        rope_[size_t(t) * hd + i] = std::cos(angle);
        rope_[size_t(t) * hd + hd / 2 + i] = std::sin(angle);
      }

    // Attention, split by KV head: keys/values of every chunk token are stored first
    // (the cache's ring has room for the chunk), then each token attends.
    {
      const uint32_t h0 = KVH * me / nt, h1 = KVH * (me + 1) / nt;
      float* scratch = &attn_scratch_[size_t(me) * per_kv * (kv_.rows() + 16)];
      for (uint32_t kvh = h0; kvh < h1; ++kvh) {
        for (uint32_t t = 0; t < n; ++t) {
          float* kk = &k_[size_t(t) * K + kvh * hd];
          ops::Zcn(kk, lw.k_norm.data(), hd, kk);
          Rope(kk, t);
          kv_.Store(l, kvh, p0 + t, kk, &v_[size_t(t) * K + kvh * hd]);
        }
        for (uint32_t t = 0; t < n; ++t) {
          float* qq = &q_[size_t(t) * A + kvh * per_kv * hd];
          for (uint32_t i = 0; i < per_kv; ++i) {
            ops::Zcn(qq + i * hd, lw.q_norm.data(), hd, qq + i * hd);
            Rope(qq + i * hd, t);
          }
          float* o = &o_[size_t(t) * A + kvh * per_kv * hd];
          kv_.Attend(l, kvh, p0 + t, qq, per_kv, o, scratch);
          float* gt = &gate_[size_t(t) * A + kvh * per_kv * hd];
          kn::SigmoidInPlace(gt, per_kv * hd);
          for (uint32_t c = 0; c < per_kv * hd; ++c) o[c] *= gt[c];
        }
      }
    }
#pragma omp barrier
#pragma omp single
    in_out_.Prepare(o_.data(), n, A, A);
    Products(in_out_, fl.out, 0, d, n, out_.data(), me, nt);
#pragma omp barrier

    // Residual, Hadamard MLP, mHC post-mix.
#pragma omp for schedule(static)
    for (uint32_t t = 0; t < n; ++t) PostMix(l, t, p0);
  }

  void Rope(float* x, uint32_t t) const {
    const uint32_t hd = g_.head_dim, half = hd / 2;
    const float* cs = &rope_[size_t(t) * hd];
    for (uint32_t i = 0; i < half; ++i) {
      const float c = cs[i], s = cs[half + i];
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * c - x2 * s;
      x[i + half] = x2 * c + x1 * s;
    }
  }

  void PostMix(uint32_t l, uint32_t t, uint32_t p0) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes, md = m * d, nh = g_.hada_n;
    const MhcWeights& mhc = m_.mhc();
    const LayerWeights& lw = m_.layer(l);
    const uint32_t selected = l % m;
    float* x = &bx_[size_t(t) * d];
    float* out = &out_[size_t(t) * d];
    ops::Zcn(out, lw.post_norm.data(), d, out);
    float ag = lw.attn_gate;
    kn::SigmoidInPlace(&ag, 1);
    for (uint32_t c = 0; c < d; ++c) x[c] += ag * out[c];

    // Hadamard MLP: x += (d3 * FWHT(silu(d2 * FWHT(d1 * ZCN(x)))))[:d].
    float* z = &mlp_[size_t(t) * nh];
    std::fill(z, z + nh, 0.f);
    ops::Zcn(x, lw.pre_hada.data(), d, z);
    for (uint32_t i = 0; i < nh; ++i) z[i] *= lw.d1[i];
    kn::FwhtOrthonormal(z, nh);
    for (uint32_t i = 0; i < nh; ++i) z[i] *= lw.d2[i];
    kn::SiluInPlace(z, nh);
    kn::FwhtOrthonormal(z, nh);
    for (uint32_t c = 0; c < d; ++c) x[c] += lw.d3[c] * z[c];

    // delta = x - u; h_post; Sinkhorn; X_new[i] = sum_j P[i][j] X[j] + h_post[i] delta.
    const float* u = &u_[size_t(t) * d];
    const float* post = &post_[size_t(t) * phi_post_.rows() + l * m];
    const float* res = &res_[size_t(t) * phi_res_.rows() + l * m * m];
    float hpost[16], P[64];
    for (uint32_t i = 0; i < m; ++i) {
      const float off = i == selected ? 0.0f : -4.0f;
      hpost[i] = mhc.a_post[l] * post[i] + mhc.b_post[l * m + i] + off;
    }
    kn::SigmoidInPlace(hpost, m);
    for (uint32_t i = 0; i < m; ++i) hpost[i] *= 2.0f;
    for (uint32_t k = 0; k < m * m; ++k) P[k] = mhc.a_res[l] * res[k] + mhc.b_res[l * m * m + k];
    SinkhornFast(P, m);
    float* X = &X_[size_t(t) * md];
    float* Xn = &nx_[size_t(t) * md];  // nx is free until the next layer
    for (uint32_t i = 0; i < m; ++i) {
      float* xi = Xn + i * d;
      std::fill(xi, xi + d, 0.f);
      for (uint32_t j = 0; j < m; ++j) {
        const float p = P[i * m + j];
        for (uint32_t c = 0; c < d; ++c) xi[c] += p * X[j * d + c];
      }
      for (uint32_t c = 0; c < d; ++c) xi[c] += hpost[i] * (x[c] - u[c]);
    }
    std::memcpy(X, Xn, md * sizeof(float));
    if (opt_.keep_hidden) {
      float* hid = &hidden_tld_[(size_t(p0 + t) * g_.num_layers + l) * d];
      LaneMean(X, hid);
    }
  }

  void LaneMean(const float* X, float* mean) const {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    std::fill(mean, mean + d, 0.f);
    for (uint32_t j = 0; j < m; ++j)
      for (uint32_t c = 0; c < d; ++c) mean[c] += X[j * d + c];
    for (uint32_t c = 0; c < d; ++c) mean[c] /= float(m);
  }

  void Logits(uint32_t n, uint32_t first, float* logits, uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model, md = g_.mhc_lanes * d, cnt = n - first;
#pragma omp for schedule(static)
    for (uint32_t t = first; t < n; ++t) {
      float* y = &y_[size_t(t - first) * d];
      LaneMean(&X_[size_t(t) * md], y);
      ops::Zcn(y, m_.final_norm().data(), d, y);
    }
#pragma omp single
    in_logits_.Prepare(y_.data(), cnt, d, d);
    Products(in_logits_, embedding_, 0, g_.vocab, cnt, logits, me, nt);
  }

  const Model& m_;
  const Geometry& g_;
  ForwardOptions opt_;
  int threads_ = 1;
  FastMatrix embedding_, phi_pre_, phi_post_, phi_res_;
  std::vector<FastLayer> layers_;
  std::vector<FastEngramSite> engram_;
  SharedInput in_mhc_, in_attn_, in_out_, in_engram_, in_logits_;
  std::vector<float> inv_freq_;
  uint32_t hist_len_ = 1;

  // Sequence state.
  std::vector<int32_t> tokens_;
  KvCache kv_;
  std::vector<std::vector<float>> eng_hist_;  // per site: ring of raw values [hist_len][d]
  std::vector<float> hidden_tld_;
  mutable std::vector<float> hidden_ltd_;

  // Chunk buffers ([chunk][...]).
  std::vector<float> X_, nx_, pre_, post_, res_, u_, bx_, h_, q_, k_, v_, gate_, o_, out_, y_;
  std::vector<float> eng_rows_, eng_vraw_, rope_, attn_scratch_, mlp_;
  std::vector<std::vector<float>> eng_k_, eng_v_;
};

}  // namespace

std::unique_ptr<Forward> MakeFastForward(const Model& model, const ForwardOptions& options,
                                         const FastForwardOptions& fast) {
  return std::make_unique<FastForward>(model, options, fast);
}

}  // namespace cact
