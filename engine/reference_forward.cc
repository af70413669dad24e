// The plain FP32 forward pass of spec section 3, one token at a time, top to bottom.
// Every weight is dequantized to FP32 at construction; the KV cache is FP32 and keeps the
// whole sequence, so feeding a prompt at once or token by token gives identical results.
#include <cmath>
#include <cstring>

#include "engine/forward.h"
#include "engine/ops.h"
#include "quant/fwht.h"

namespace cact {
namespace {

// Dense FP32 copies of one layer's matrices.
struct DenseLayer {
  std::vector<float> wq, wk, wv, wgate, wout;
};

struct DenseEngramSite {
  std::vector<float> tables;      // [T*S, s]
  std::vector<float> key_proj;    // [d, T*s]
  std::vector<float> value_proj;  // [d, T*s]
};

class ReferenceForward final : public Forward {
 public:
  ReferenceForward(const Model& model, const ForwardOptions& options)
      : m_(model), g_(model.geometry()), opt_(options) {
    embedding_ = model.embedding().Dequantize();
    for (const LayerWeights& lw : model.layers()) {
      DenseLayer dl;
      dl.wq = lw.q_proj.Dequantize();
      dl.wk = lw.k_proj.Dequantize();
      dl.wv = lw.v_proj.Dequantize();
      dl.wgate = lw.gate_proj.Dequantize();
      dl.wout = lw.out_proj.Dequantize();
      layers_.push_back(std::move(dl));
    }
    phi_pre_ = model.mhc().phi_pre.Dequantize();
    phi_post_ = model.mhc().phi_post.Dequantize();
    phi_res_ = model.mhc().phi_res.Dequantize();
    for (const EngramSiteWeights& es : model.engram_sites()) {
      DenseEngramSite ds;
      ds.tables = es.tables.Dequantize();
      ds.key_proj = es.key_proj.Dequantize();
      ds.value_proj = es.value_proj.Dequantize();
      engram_.push_back(std::move(ds));
    }
    inv_freq_ = ops::RopeInvFreq(g_.head_dim, g_.rope_theta);
    Reset();
  }

  void Reset() override {
    tokens_.clear();
    k_cache_.assign(g_.num_layers, {});
    v_cache_.assign(g_.num_layers, {});
    engram_v_.assign(engram_.size(), {});
    hidden_.Clear();
  }

  absl::Status Feed(std::span<const int32_t> tokens, std::vector<float>* logits,
                    bool all_positions) override {
    if (auto st = BeginFeed(m_, position(), tokens, logits, all_positions); !st.ok()) return st;
    const size_t n = tokens.size(), V = g_.vocab;
    for (size_t i = 0; i < n; ++i) {
      const bool want = logits && (all_positions || i + 1 == n);
      float* out = want ? logits->data() + (all_positions ? i : 0) * V : nullptr;
      Step(tokens[i], out);
    }
    return absl::OkStatus();
  }

  uint32_t position() const override { return uint32_t(tokens_.size()); }

  const std::vector<float>& hidden() const override {
    return hidden_.ByLayer(g_.num_layers, g_.d_model);
  }
  const std::vector<float>& hidden_by_position() const override {
    return hidden_.by_position();
  }

  std::string name() const override { return "reference"; }

 private:
  // ---- one token through the whole model -------------------------------------------
  void Step(int32_t token, float* logits) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes, pos = position();
    tokens_.push_back(token);

    // 1. Scaled embedding, copied into every lane.
    std::vector<float> e(d);
    std::memcpy(e.data(), &embedding_[size_t(token) * d], d * sizeof(float));
    const float scale = std::sqrt(float(d));
    for (float& v : e) v *= scale;
    std::vector<float> X(size_t(m) * d);
    for (uint32_t j = 0; j < m; ++j) std::memcpy(&X[j * d], e.data(), d * sizeof(float));

    // Engram memory depends on tokens only: compute every site's key and value now.
    std::vector<std::vector<float>> engram_k(engram_.size()), engram_v(engram_.size());
    for (size_t s = 0; s < engram_.size(); ++s) EngramMemory(s, pos, &engram_k[s], &engram_v[s]);

    for (uint32_t l = 0; l < g_.num_layers; ++l) {
      Layer(l, pos, engram_k, engram_v, X);
      if (opt_.keep_hidden) {
        std::vector<float> mean = LaneMean(X);
        hidden_.by_position().insert(hidden_.by_position().end(), mean.begin(), mean.end());
      }
    }
    if (logits) Logits(X, logits);
  }

  // Layer l's mHC projections of nx = rms_unit(flatten(X)).
  struct MhcProjections {
    std::vector<float> pre, post, res;  // [m], [m], [m * m]
  };

  // ---- one layer: mHC pre-mix, engram, attention, Hadamard MLP, mHC post-mix ---------
  void Layer(uint32_t l, uint32_t pos, const std::vector<std::vector<float>>& engram_k,
             const std::vector<std::vector<float>>& engram_v, std::vector<float>& X) {
    MhcProjections proj;
    const std::vector<float> u = PreMix(l, X, &proj);
    // Engram injection: bx = u + sigmoid(rms_unit(u) . rms_unit(k) / sqrt(d)) * v.
    std::vector<float> x = u;
    const int site = m_.layer(l).engram_site;
    if (site >= 0) EngramInject(u, engram_k[site], engram_v[site], x);
    AttentionBlock(l, pos, x);
    HadamardMlp(l, x);
    PostMix(l, proj, u, x, X);
  }

  // ---- mHC pre-mix: nx, the three projections, u = sum_j h_pre[j] * X[j] ------------
  std::vector<float> PreMix(uint32_t l, const std::vector<float>& X, MhcProjections* proj) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const uint32_t selected = l % m;
    const MhcWeights& mhc = m_.mhc();
    std::vector<float> nx(size_t(m) * d);
    ops::RmsUnit(X.data(), nx.size(), nx.data());
    std::vector<float>& pre = proj->pre;
    pre.resize(m);
    proj->post.resize(m);
    proj->res.resize(size_t(m) * m);
    ops::MatVec(&phi_pre_[size_t(l) * m * m * d], m, size_t(m) * d, nx.data(), pre.data());
    ops::MatVec(&phi_post_[size_t(l) * m * m * d], m, size_t(m) * d, nx.data(), proj->post.data());
    ops::MatVec(&phi_res_[size_t(l) * m * m * m * d], size_t(m) * m, size_t(m) * d, nx.data(),
                proj->res.data(), opt_.threads);

    // pre_off = +4 on the selected lane, -4 elsewhere.
    std::vector<float> u(d, 0.0f);
    for (uint32_t j = 0; j < m; ++j) {
      const float off = j == selected ? 4.0f : -4.0f;
      const float h = ops::Sigmoid(mhc.a_pre[l] * pre[j] + mhc.b_pre[l * m + j] + off);
      for (uint32_t c = 0; c < d; ++c) u[c] += h * X[j * d + c];
    }
    return u;
  }

  // ---- mHC post-mix: X <- sum_j P[i][j] X[j] + h_post[i] * (x - u) ------------------
  // (u before the engram injection, x after the MLP).
  void PostMix(uint32_t l, const MhcProjections& proj, const std::vector<float>& u,
               const std::vector<float>& x, std::vector<float>& X) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const uint32_t selected = l % m;
    const MhcWeights& mhc = m_.mhc();
    std::vector<float> delta(d);
    for (uint32_t c = 0; c < d; ++c) delta[c] = x[c] - u[c];

    // h_post = 2 * sigmoid(...), post_off = 0 on the selected lane, -4 elsewhere.
    std::vector<float> h_post(m);
    for (uint32_t i = 0; i < m; ++i) {
      const float off = i == selected ? 0.0f : -4.0f;
      h_post[i] = 2.0f * ops::Sigmoid(mhc.a_post[l] * proj.post[i] + mhc.b_post[l * m + i] + off);
    }
    // P = Sinkhorn(a_res * res + b_res).
    std::vector<float> P(size_t(m) * m);
    for (uint32_t k = 0; k < m * m; ++k)
      P[k] = mhc.a_res[l] * proj.res[k] + mhc.b_res[l * m * m + k];
    ops::SinkhornLog(P.data(), m);

    // X_new[i] = sum_j P[i][j] X[j] + h_post[i] * delta.
    std::vector<float> Xn(size_t(m) * d, 0.0f);
    for (uint32_t i = 0; i < m; ++i) {
      float* xi = &Xn[i * d];
      for (uint32_t j = 0; j < m; ++j) {
        const float p = P[i * m + j];
        for (uint32_t c = 0; c < d; ++c) xi[c] += p * X[j * d + c];
      }
      for (uint32_t c = 0; c < d; ++c) xi[c] += h_post[i] * delta[c];
    }
    X.swap(Xn);
  }

  // ---- attention sub-block: x <- x + sigmoid(attn_gate) * ZCN(out_proj(...)) --------
  void AttentionBlock(uint32_t l, uint32_t pos, std::vector<float>& x) {
    const uint32_t d = g_.d_model, hd = g_.head_dim, H = g_.num_heads, KVH = g_.num_kv_heads;
    const uint32_t A = g_.attn_dim(), K = g_.kv_dim();
    const LayerWeights& lw = m_.layer(l);
    const DenseLayer& w = layers_[l];

    std::vector<float> h(d);
    ops::Zcn(x.data(), lw.norm_in.data(), d, h.data());
    std::vector<float> q(A), k(K), v(K), gate(A);
    ops::MatVec(w.wq.data(), A, d, h.data(), q.data(), opt_.threads);
    ops::MatVec(w.wk.data(), K, d, h.data(), k.data(), opt_.threads);
    ops::MatVec(w.wv.data(), K, d, h.data(), v.data(), opt_.threads);
    ops::MatVec(w.wgate.data(), A, d, h.data(), gate.data(), opt_.threads);

    // Per-head ZCN then half-split RoPE on queries and keys.
    for (uint32_t hh = 0; hh < H; ++hh) {
      ops::Zcn(&q[hh * hd], lw.q_norm.data(), hd, &q[hh * hd]);
      ops::RopeHalfSplit(&q[hh * hd], hd, pos, inv_freq_);
    }
    for (uint32_t kh = 0; kh < KVH; ++kh) {
      ops::Zcn(&k[kh * hd], lw.k_norm.data(), hd, &k[kh * hd]);
      ops::RopeHalfSplit(&k[kh * hd], hd, pos, inv_freq_);
    }
    std::vector<float>& kc = k_cache_[l];
    std::vector<float>& vc = v_cache_[l];
    kc.insert(kc.end(), k.begin(), k.end());
    vc.insert(vc.end(), v.begin(), v.end());

    // Softmax(q.k / sqrt(hd)) over the visible keys, times V; GQA head sharing.
    const uint32_t group = H / KVH;
    const float inv_scale = 1.0f / std::sqrt(float(hd));
    std::vector<float> o(A, 0.0f), score(pos + 1);
    for (uint32_t hh = 0; hh < H; ++hh) {
      const uint32_t kvh = hh / group;
      const float* qh = &q[hh * hd];
      float mx = -INFINITY;
      for (uint32_t key = 0; key <= pos; ++key) {
        if (!opt_.attn.Visible(pos, key)) {
          score[key] = -INFINITY;
          continue;
        }
        score[key] = ops::Dot(qh, &kc[size_t(key) * K + kvh * hd], hd) * inv_scale;
        mx = std::max(mx, score[key]);
      }
      float sum = 0;
      for (uint32_t key = 0; key <= pos; ++key) {
        score[key] = std::isinf(score[key]) ? 0.0f : std::exp(score[key] - mx);
        sum += score[key];
      }
      float* oh = &o[hh * hd];
      for (uint32_t key = 0; key <= pos; ++key) {
        if (score[key] == 0.0f) continue;
        const float p = score[key] / sum;
        const float* vk = &vc[size_t(key) * K + kvh * hd];
        for (uint32_t c = 0; c < hd; ++c) oh[c] += p * vk[c];
      }
    }
    // Output gate, out_proj, post-norm, gated residual.
    for (uint32_t i = 0; i < A; ++i) o[i] *= ops::Sigmoid(gate[i]);
    std::vector<float> out(d);
    ops::MatVec(w.wout.data(), d, A, o.data(), out.data(), opt_.threads);
    ops::Zcn(out.data(), lw.post_norm.data(), d, out.data());
    const float g = ops::Sigmoid(lw.attn_gate);
    for (uint32_t c = 0; c < d; ++c) x[c] += g * out[c];
  }

  // ---- Hadamard MLP: x <- x + (d3 * FWHT(silu(d2 * FWHT(d1 * ZCN(x)))))[:d] ------------
  void HadamardMlp(uint32_t l, std::vector<float>& x) {
    const uint32_t d = g_.d_model, n = g_.hada_n;
    const LayerWeights& lw = m_.layer(l);
    std::vector<float> z(n, 0.0f);
    ops::Zcn(x.data(), lw.pre_hada.data(), d, z.data());
    for (uint32_t i = 0; i < n; ++i) z[i] *= lw.d1[i];
    FwhtOrthonormal(z.data(), n);
    for (uint32_t i = 0; i < n; ++i) z[i] = ops::Silu(lw.d2[i] * z[i]);
    FwhtOrthonormal(z.data(), n);
    for (uint32_t c = 0; c < d; ++c) x[c] += lw.d3[c] * z[c];
  }

  // ---- engram memory of site s at position t: key k and convolved value v' ----------
  void EngramMemory(size_t s, uint32_t t, std::vector<float>* k_out, std::vector<float>* v_out) {
    const uint32_t d = g_.d_model, T = g_.num_engram_tables, S = g_.engram_slots,
                   sub = g_.engram_sub_dim, hpo = g_.heads_per_order();
    const DenseEngramSite& w = engram_[s];
    // Gather one table row per (order, head); rows whose n-gram reaches before the start
    // (fewer than order-1 earlier tokens) are zero.
    std::vector<float> rows(size_t(T) * sub, 0.0f);
    for (uint32_t table = 0; table < T; ++table) {
      const uint32_t order = g_.engram_orders[table / hpo];
      if (t + 1 < order) continue;
      const uint32_t slot = ops::EngramSlot(table, order, tokens_, t, S);
      std::memcpy(&rows[size_t(table) * sub], &w.tables[(size_t(table) * S + slot) * sub],
                  sub * sizeof(float));
    }
    k_out->resize(d);
    std::vector<float> v(d);
    ops::MatVec(w.key_proj.data(), d, size_t(T) * sub, rows.data(), k_out->data(), opt_.threads);
    ops::MatVec(w.value_proj.data(), d, size_t(T) * sub, rows.data(), v.data(), opt_.threads);
    std::vector<float>& hist = engram_v_[s];
    hist.insert(hist.end(), v.begin(), v.end());

    // Causal depthwise convolution over `taps` taps spaced by the dilation.
    const std::vector<float>& taps = m_.engram_sites()[s].taps;
    const uint32_t dil = g_.engram_conv_dilation;
    v_out->assign(d, 0.0f);
    for (uint32_t j = 0; j < g_.engram_conv_taps; ++j) {
      if (uint64_t(j) * dil > t) break;
      const float* vj = &hist[size_t(t - j * dil) * d];
      for (uint32_t c = 0; c < d; ++c) (*v_out)[c] += taps[size_t(j) * d + c] * vj[c];
    }
  }

  void EngramInject(const std::vector<float>& u, const std::vector<float>& k,
                    const std::vector<float>& v, std::vector<float>& x) {
    const uint32_t d = g_.d_model;
    std::vector<float> nu(d), nk(d);
    ops::RmsUnit(u.data(), d, nu.data());
    ops::RmsUnit(k.data(), d, nk.data());
    const float alpha = ops::Sigmoid(ops::Dot(nu.data(), nk.data(), d) / std::sqrt(float(d)));
    for (uint32_t c = 0; c < d; ++c) x[c] = u[c] + alpha * v[c];
  }

  std::vector<float> LaneMean(const std::vector<float>& X) const {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    std::vector<float> mean(d, 0.0f);
    for (uint32_t j = 0; j < m; ++j)
      for (uint32_t c = 0; c < d; ++c) mean[c] += X[j * d + c];
    for (float& v : mean) v /= float(m);
    return mean;
  }

  // ---- y = ZCN(lane mean, final_norm); logits = y embedding^T (tied) ----------------
  void Logits(const std::vector<float>& X, float* logits) {
    std::vector<float> y = LaneMean(X);
    ops::Zcn(y.data(), m_.final_norm().data(), y.size(), y.data());
    ops::MatVec(embedding_.data(), g_.vocab, g_.d_model, y.data(), logits, opt_.threads);
  }

  const Model& m_;
  const Geometry& g_;
  ForwardOptions opt_;
  std::vector<float> embedding_;
  std::vector<DenseLayer> layers_;
  std::vector<float> phi_pre_, phi_post_, phi_res_;
  std::vector<DenseEngramSite> engram_;
  std::vector<float> inv_freq_;

  // Sequence state.
  std::vector<int32_t> tokens_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer [pos][K], keys rope'd
  std::vector<std::vector<float>> engram_v_;           // per site [pos][d], before the conv
  HiddenRecord hidden_;
};

}  // namespace

std::unique_ptr<Forward> MakeReferenceForward(const Model& model, const ForwardOptions& options) {
  return std::make_unique<ReferenceForward>(model, options);
}

}  // namespace cact
