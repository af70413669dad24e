// The plain FP32 forward pass of spec section 3, one token at a time, top to bottom.
// Every weight is dequantized to FP32 at construction; the KV cache is FP32 and keeps the
// whole sequence, so feeding a prompt at once or token by token gives identical results.
#include <cmath>
#include <cstring>

#include "engine/forward.h"
#include "engine/forward_state_bytes.h"
#include "engine/needle_steps.h"
#include "engine/ops.h"
#include "lib/status.h"
#include "quant/cq/fwht.h"

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
      : m_(model), g_(model.geometry()), b_(model.block()), opt_(options) {
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
  uint32_t hidden_from() const override { return hidden_.first(); }

  std::string name() const override { return "reference"; }

  std::unique_ptr<State> Save() const override {
    auto s = std::make_unique<SavedState>();
    s->owner = this;
    s->tokens = tokens_;
    s->k_cache = k_cache_;
    s->v_cache = v_cache_;
    s->engram_v = engram_v_;
    s->hidden = hidden_;
    return s;
  }

  absl::Status Restore(const State& state) override {
    const auto* s = SavedHere<const SavedState>(&state);
    if (!s) return NotSavedHere();
    // Copy-assigned: the vectors keep their capacity, so restoring allocates nothing.
    tokens_ = s->tokens;
    k_cache_ = s->k_cache;
    v_cache_ = s->v_cache;
    engram_v_ = s->engram_v;
    hidden_ = s->hidden;
    return absl::OkStatus();
  }

  absl::Status Adopt(std::unique_ptr<State> state) override {
    auto* s = SavedHere<SavedState>(state.get());
    if (!s) return NotSavedHere();
    tokens_ = std::move(s->tokens);
    k_cache_ = std::move(s->k_cache);
    v_cache_ = std::move(s->v_cache);
    engram_v_ = std::move(s->engram_v);
    hidden_ = std::move(s->hidden);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> StateBytes(const State& state, bool hidden) const override {
    const auto* s = SavedHere<const SavedState>(&state);
    if (!s) return NotSavedHere();
    ByteWriter w;
    state_bytes::PutTokens(w, s->tokens);
    for (size_t l = 0; l < s->k_cache.size(); ++l) {
      state_bytes::PutFloats(w, s->k_cache[l]);
      state_bytes::PutFloats(w, s->v_cache[l]);
    }
    for (const std::vector<float>& v : s->engram_v) state_bytes::PutFloats(w, v);
    state_bytes::PutHidden(w, s->hidden, opt_.keep_hidden, hidden);
    return std::move(w.bytes());
  }

  absl::StatusOr<std::unique_ptr<State>> StateFromBytes(std::string_view bytes,
                                                        const std::string& name,
                                                        uint64_t base) const override {
    ByteReader r(bytes, name, base);
    auto s = std::make_unique<SavedState>();
    s->owner = this;
    CACT_RETURN_IF_ERROR(state_bytes::GetTokens(r, m_, &s->tokens));
    const size_t positions = s->tokens.size();
    const size_t kv = positions * g_.num_kv_heads * g_.head_dim;
    s->k_cache.resize(g_.num_layers);
    s->v_cache.resize(g_.num_layers);
    for (uint32_t l = 0; l < g_.num_layers; ++l) {
      CACT_RETURN_IF_ERROR(state_bytes::GetFloats(r, "keys", kv, &s->k_cache[l]));
      CACT_RETURN_IF_ERROR(state_bytes::GetFloats(r, "values", kv, &s->v_cache[l]));
    }
    s->engram_v.resize(engram_.size());
    for (std::vector<float>& v : s->engram_v)
      CACT_RETURN_IF_ERROR(
          state_bytes::GetFloats(r, "engram values", positions * g_.d_model, &v));
    CACT_RETURN_IF_ERROR(
        state_bytes::GetHidden(r, opt_.keep_hidden, positions, m_, &s->hidden));
    CACT_RETURN_IF_ERROR(r.ExpectEnd("the state"));
    return s;
  }

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
        std::vector<float>& h = hidden_.by_position();
        h.resize(h.size() + d);
        steps::LaneMean(X.data(), m, d, &h[h.size() - d]);
      }
    }
    if (logits) Logits(X, logits);
  }

  // Layer l's mHC projections of nx = rms_unit(flatten(X)).
  struct MhcProjections {
    std::vector<float> pre, post, res;  // [m], [m], [m * m]
  };

  // ---- one layer: the block's stages in the order BlockSpec lists them ---------------
  // u is the pre-mix's mix of the lanes, x the block's running value (bx).
  void Layer(uint32_t l, uint32_t pos, const std::vector<std::vector<float>>& engram_k,
             const std::vector<std::vector<float>>& engram_v, std::vector<float>& X) {
    MhcProjections proj;
    std::vector<float> u, x;
    const int site = m_.layer(l).engram_site;
    for (BlockStage stage : b_.stages) {
      switch (stage) {
        case BlockStage::kPreMix:
          u = PreMix(l, X, &proj);
          x = u;
          break;
        case BlockStage::kEngram:
          if (site >= 0) EngramInject(u, engram_k[site], engram_v[site], x);
          break;
        case BlockStage::kAttention:
          AttentionBlock(l, pos, x);
          break;
        case BlockStage::kHadamardMlp:
          HadamardMlp(l, x);
          break;
        case BlockStage::kPostMix:
          PostMix(l, proj, u, x, X);
          break;
      }
    }
  }

  // ---- mHC pre-mix: nx, the three projections, u = sum_j h_pre[j] * X[j] ------------
  std::vector<float> PreMix(uint32_t l, const std::vector<float>& X, MhcProjections* proj) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const uint32_t selected = l % m;
    const MhcWeights& mhc = m_.mhc();
    std::vector<float> nx(size_t(m) * d);
    ops::RmsUnit(X.data(), nx.size(), b_.norm_eps, nx.data());
    std::vector<float>& pre = proj->pre;
    pre.resize(m);
    proj->post.resize(m);
    proj->res.resize(size_t(m) * m);
    ops::MatVec(&phi_pre_[size_t(l) * m * m * d], m, size_t(m) * d, nx.data(), pre.data());
    ops::MatVec(&phi_post_[size_t(l) * m * m * d], m, size_t(m) * d, nx.data(), proj->post.data());
    ops::MatVec(&phi_res_[size_t(l) * m * m * m * d], size_t(m) * m, size_t(m) * d, nx.data(),
                proj->res.data(), opt_.threads);

    // pre_off: the block's offset of the selected lane, or of the others.
    std::vector<float> u(d, 0.0f);
    for (uint32_t j = 0; j < m; ++j) {
      const float off = j == selected ? b_.pre_offset_selected : b_.pre_offset_other;
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

    // h_post = post_gain * sigmoid(... + post_off), post_off the selected lane's or the others'.
    std::vector<float> h_post(m);
    for (uint32_t i = 0; i < m; ++i) {
      const float off = i == selected ? b_.post_offset_selected : b_.post_offset_other;
      h_post[i] =
          b_.post_gain * ops::Sigmoid(mhc.a_post[l] * proj.post[i] + mhc.b_post[l * m + i] + off);
    }
    // P = Sinkhorn(a_res * res + b_res).
    std::vector<float> P(size_t(m) * m);
    for (uint32_t k = 0; k < m * m; ++k)
      P[k] = mhc.a_res[l] * proj.res[k] + mhc.b_res[l * m * m + k];
    ops::SinkhornLog(P.data(), m, b_.sinkhorn_iters);

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
    ops::Zcn(x.data(), lw.norm_in.data(), d, b_.norm_eps, h.data());
    std::vector<float> q(A), k(K), v(K), gate(A);
    ops::MatVec(w.wq.data(), A, d, h.data(), q.data(), opt_.threads);
    ops::MatVec(w.wk.data(), K, d, h.data(), k.data(), opt_.threads);
    ops::MatVec(w.wv.data(), K, d, h.data(), v.data(), opt_.threads);
    ops::MatVec(w.wgate.data(), A, d, h.data(), gate.data(), opt_.threads);

    // Per-head ZCN then half-split RoPE on queries and keys.
    for (uint32_t hh = 0; hh < H; ++hh) {
      ops::Zcn(&q[hh * hd], lw.q_norm.data(), hd, b_.norm_eps, &q[hh * hd]);
      ops::RopeHalfSplit(&q[hh * hd], hd, pos, inv_freq_);
    }
    for (uint32_t kh = 0; kh < KVH; ++kh) {
      ops::Zcn(&k[kh * hd], lw.k_norm.data(), hd, b_.norm_eps, &k[kh * hd]);
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
    ops::Zcn(out.data(), lw.post_norm.data(), d, b_.norm_eps, out.data());
    const float g = ops::Sigmoid(lw.attn_gate);
    for (uint32_t c = 0; c < d; ++c) x[c] += g * out[c];
  }

  // ---- Hadamard MLP: x <- x + (d3 * FWHT(silu(d2 * FWHT(d1 * ZCN(x)))))[:d] ------------
  void HadamardMlp(uint32_t l, std::vector<float>& x) {
    const uint32_t d = g_.d_model, n = g_.hada_n;
    const LayerWeights& lw = m_.layer(l);
    std::vector<float> z(n, 0.0f);
    ops::Zcn(x.data(), lw.pre_hada.data(), d, b_.norm_eps, z.data());
    for (uint32_t i = 0; i < n; ++i) z[i] *= lw.d1[i];
    FwhtOrthonormal(z.data(), n);
    for (uint32_t i = 0; i < n; ++i) z[i] = ops::Silu(lw.d2[i] * z[i]);
    FwhtOrthonormal(z.data(), n);
    for (uint32_t c = 0; c < d; ++c) x[c] += lw.d3[c] * z[c];
  }

  // ---- engram memory of site s at position t: key k and convolved value v' ----------
  void EngramMemory(size_t s, uint32_t t, std::vector<float>* k_out, std::vector<float>* v_out) {
    const uint32_t d = g_.d_model, T = g_.num_engram_tables, sub = g_.engram_sub_dim;
    const DenseEngramSite& w = engram_[s];
    // One table row per (order, head), from the dense tables.
    std::vector<float> rows(size_t(T) * sub);
    auto dense_row = [&](uint32_t row, float* out) {
      std::memcpy(out, &w.tables[size_t(row) * sub], sub * sizeof(float));
    };
    steps::GatherEngramRows(g_, tokens_, t, dense_row, rows.data());
    k_out->resize(d);
    std::vector<float> v(d);
    ops::MatVec(w.key_proj.data(), d, size_t(T) * sub, rows.data(), k_out->data(), opt_.threads);
    ops::MatVec(w.value_proj.data(), d, size_t(T) * sub, rows.data(), v.data(), opt_.threads);
    std::vector<float>& hist = engram_v_[s];
    hist.insert(hist.end(), v.begin(), v.end());

    // Causal depthwise convolution over the whole history of raw values.
    v_out->resize(d);
    auto value_at = [&](uint32_t p) { return &hist[size_t(p) * d]; };
    steps::EngramConv(g_, m_.engram_sites()[s].taps.data(), t, value_at, v_out->data());
  }

  void EngramInject(const std::vector<float>& u, const std::vector<float>& k,
                    const std::vector<float>& v, std::vector<float>& x) {
    const uint32_t d = g_.d_model;
    std::vector<float> nu(d), nk(d);
    ops::RmsUnit(u.data(), d, b_.norm_eps, nu.data());
    ops::RmsUnit(k.data(), d, b_.norm_eps, nk.data());
    const float alpha = ops::Sigmoid(ops::Dot(nu.data(), nk.data(), d) / std::sqrt(float(d)));
    for (uint32_t c = 0; c < d; ++c) x[c] = u[c] + alpha * v[c];
  }

  // ---- y = ZCN(lane mean, final_norm); logits = y embedding^T (tied) ----------------
  void Logits(const std::vector<float>& X, float* logits) {
    std::vector<float> y(g_.d_model);
    steps::LaneMean(X.data(), g_.mhc_lanes, g_.d_model, y.data());
    ops::Zcn(y.data(), m_.final_norm().data(), y.size(), b_.norm_eps, y.data());
    ops::MatVec(embedding_.data(), g_.vocab, g_.d_model, y.data(), logits, opt_.threads);
  }

  const Model& m_;
  const Geometry& g_;
  const BlockSpec& b_;  // the model's block: its stage order and constants
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
  struct SavedState final : State {
    const ReferenceForward* owner = nullptr;
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> k_cache, v_cache, engram_v;
    HiddenRecord hidden;
  };
};

}  // namespace

std::unique_ptr<Forward> MakeReferenceForward(const Model& model, const ForwardOptions& options) {
  return std::make_unique<ReferenceForward>(model, options);
}

}  // namespace cact
