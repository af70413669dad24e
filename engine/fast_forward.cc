// Fast forward path (see fast_forward.h). One chunk of tokens runs as one job of a
// persistent thread team (kernels::Team): per-token work is shared out by token (decode:
// repeated on every thread), matrix products by 16-row blocks, attention by KV head.
// A layer is the reference's steps (reference_forward.cc, Layer) in the same order:
// pre-mix, engram injection, attention, Hadamard MLP, post-mix; the two schedules
// (DecodeLayer, PrefillLayer) call them with the barriers between. That order is written
// into the schedules: Model::Build turns away a block whose stage list differs. Every
// constant comes from the model's block (Model::block()).
#include "engine/fast_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "engine/activations.h"
#include "engine/fast_matrix.h"
#include "engine/forward_state_bytes.h"
#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops.h"
#include "engine/kernels/team.h"
#include "engine/kv_cache.h"
#include "engine/needle_steps.h"
#include "engine/ops.h"
#include "engine/row_decode.h"
#include "lib/huge_page_buffer.h"
#include "lib/status.h"
#include "quant/cq/fp16.h"

namespace cact {
namespace {

namespace kn = kernels;
using fast::Activations;
using fast::DecodeRow;
using fast::FastMatrix;
using fast::ReadAndDecodeRow;
using fast::SharedInput;
using fast::SplitRange;
using fast::TokenBuffers;
using fast::TokenView;

// Prefill attends this many consecutive tokens of a KV head together (each key and value
// row converted once for all of them).
constexpr uint32_t kAttendBlock = kn::AttentionBlock::kMaxTokens;

// The int8 levels of every activation the products and the attention scores quantize.
kn::ActPrecision ActPrecisionOf(const FastForwardOptions& fast) {
  return fast.two_level_activations ? kn::ActPrecision::kInt8x2 : kn::ActPrecision::kInt8;
}

struct FastLayer {
  FastMatrix q, k, v, gate, out;
};

struct FastEngramSite {
  FastMatrix key, value;
};

// Sinkhorn in the exponential domain (double): P = exp(A - max A), then `iters` times
// normalise rows then columns: the same iteration as the log-space version (subtracting a
// logsumexp is dividing by a sum). Falls back to the log-space one if the spread of A is
// so large that exp would underflow in double.
void SinkhornFast(float* a, uint32_t m, int iters) {
  float mx = a[0], mn = a[0];
  for (uint32_t i = 1; i < m * m; ++i) {
    mx = std::max(mx, a[i]);
    mn = std::min(mn, a[i]);
  }
  if (!(mx - mn < 600.f) || m > 8) {
    ops::SinkhornLog(a, m, iters);
    return;
  }
  double p[64];
  for (uint32_t i = 0; i < m * m; ++i) p[i] = std::exp(double(a[i]) - double(mx));
  for (int it = 0; it < iters; ++it) {
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
      : m_(model),
        g_(model.geometry()),
        b_(model.block()),
        opt_(options),
        threads_(std::max(1, options.threads)),
        team_(uint32_t(threads_)),
        kv_(g_.num_layers, g_.num_kv_heads, g_.head_dim, options.attn, g_.max_seq_len,
            kAttendBlock - 1, ActPrecisionOf(fast)),
        act_(g_, kFastPrefillChunk, uint32_t(threads_), model.engram_sites().size(), kv_.rows()),
        name_(fast.two_level_activations || fast.codebook_residual ? "fast" : "fast-int8") {
    const FastForwardOptions& lo = fast;
    embedding_ = FastMatrix(model.embedding(), lo);
    for (const LayerWeights& lw : model.layers()) {
      FastLayer fl{FastMatrix(lw.q_proj, lo), FastMatrix(lw.k_proj, lo), FastMatrix(lw.v_proj, lo),
                   FastMatrix(lw.gate_proj, lo), FastMatrix(lw.out_proj, lo)};
      layers_.push_back(std::move(fl));
    }
    phi_pre_ = FastMatrix(model.mhc().phi_pre, lo);
    phi_post_ = FastMatrix(model.mhc().phi_post, lo);
    phi_res_ = FastMatrix(model.mhc().phi_res, lo);
    // Each layer's pre, post and res rows as one product when the records allow it.
    const uint32_t m = g_.mhc_lanes;
    for (uint32_t l = 0; l < g_.num_layers; ++l) {
      auto stack = FastMatrix::Stack({{&phi_pre_, l * m, l * m + m},
                                      {&phi_post_, l * m, l * m + m},
                                      {&phi_res_, l * m * m, (l + 1) * m * m}});
      if (!stack) {
        mhc_stack_.clear();
        break;
      }
      mhc_stack_.push_back(std::move(*stack));
    }
    for (const EngramSiteWeights& es : model.engram_sites())
      engram_.push_back({FastMatrix(es.key_proj, lo), FastMatrix(es.value_proj, lo)});
    if (fast.code_tiles) {
      ReleaseColdFilePages(model);  // first what no product reads, so the peak stays low
      BuildTiles(model);
    }

    inputs_.resize(threads_);  // [0] serves the prefill path too
    const kn::ActPrecision precision = ActPrecisionOf(fast);
    for (Inputs& in : inputs_) {
      for (SharedInput* s : {&in.mhc, &in.attn, &in.out, &in.engram, &in.logits})
        s->SetPrecision(precision);
      for (const FastMatrix* mm : {&phi_pre_, &phi_post_, &phi_res_}) in.mhc.AddConsumer(*mm);
      for (const FastMatrix& mm : mhc_stack_) in.mhc.AddConsumer(mm);
      for (const FastLayer& fl : layers_) {
        for (const FastMatrix* mm : {&fl.q, &fl.k, &fl.v, &fl.gate}) in.attn.AddConsumer(*mm);
        in.out.AddConsumer(fl.out);
      }
      for (const FastEngramSite& es : engram_) {
        in.engram.AddConsumer(es.key);
        in.engram.AddConsumer(es.value);
      }
      in.logits.AddConsumer(embedding_);
    }

    ReleaseColdFilePages(model);
    inv_freq_ = ops::RopeInvFreq(g_.head_dim, g_.rope_theta);
    hist_len_ =
        (g_.engram_conv_taps > 0 ? (g_.engram_conv_taps - 1) * g_.engram_conv_dilation : 0) + 1;
    Reset();
  }

  void Reset() override {
    tokens_.clear();
    kv_.Reset();
    eng_hist_.assign(engram_.size(), std::vector<float>(size_t(hist_len_) * g_.d_model, 0.f));
    hidden_.Clear();
  }

  absl::Status Feed(std::span<const int32_t> tokens, std::vector<float>* logits,
                    bool all_positions) override {
    if (auto st = CheckFeed(m_, position(), tokens); !st.ok()) return st;
    const size_t n = tokens.size(), V = g_.vocab;
    // BeginFeed's shape without its zero fill: the products write every element (a reused
    // [512, vocab] vector is 16 MB of stores saved per Feed).
    if (logits) logits->resize((all_positions ? n : (n ? 1 : 0)) * V);
    if (logits && all_positions && n > act_.chunk.n && act_.chunk.n < kFastLogitsChunk)
      act_.SetChunk(kFastLogitsChunk);  // and keeps it (same results at any chunk size)
    const uint32_t chunk = act_.chunk.n;
    for (size_t i = 0; i < n; i += chunk) {
      const uint32_t cn = uint32_t(std::min<size_t>(chunk, n - i));
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
    return hidden_.ByLayer(g_.num_layers, g_.d_model);
  }
  const std::vector<float>& hidden_by_position() const override {
    return hidden_.by_position();
  }
  uint32_t hidden_from() const override { return hidden_.first(); }

  // "fast-int8" with plain int8 numerics (forward_paths.h).
  std::string name() const override { return name_; }

  std::unique_ptr<State> Save() const override {
    auto s = std::make_unique<SavedState>(kv_);
    s->owner = this;
    s->tokens = tokens_;
    s->eng_hist = eng_hist_;
    s->hidden = hidden_;
    return s;
  }

  absl::Status Restore(const State& state) override {
    const auto* s = SavedHere<const SavedState>(&state);
    if (!s) return NotSavedHere();
    // Copy-assigned: the vectors keep their capacity, so restoring allocates nothing.
    tokens_ = s->tokens;
    kv_ = s->kv;
    eng_hist_ = s->eng_hist;
    hidden_ = s->hidden;
    return absl::OkStatus();
  }

  absl::Status Adopt(std::unique_ptr<State> state) override {
    auto* s = SavedHere<SavedState>(state.get());
    if (!s) return NotSavedHere();
    tokens_ = std::move(s->tokens);
    kv_ = std::move(s->kv);
    eng_hist_ = std::move(s->eng_hist);
    hidden_ = std::move(s->hidden);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> StateBytes(const State& state, bool hidden) const override {
    const auto* s = SavedHere<const SavedState>(&state);
    if (!s) return NotSavedHere();
    ByteWriter w;
    state_bytes::PutTokens(w, s->tokens);
    s->kv.AppendRows(w);
    for (const std::vector<float>& ring : s->eng_hist) state_bytes::PutFloats(w, ring);
    state_bytes::PutHidden(w, s->hidden, opt_.keep_hidden, hidden);
    return std::move(w.bytes());
  }

  absl::StatusOr<std::unique_ptr<State>> StateFromBytes(std::string_view bytes,
                                                        const std::string& name,
                                                        uint64_t base) const override {
    ByteReader r(bytes, name, base);
    auto s = std::make_unique<SavedState>(kv_);
    s->owner = this;
    CACT_RETURN_IF_ERROR(state_bytes::GetTokens(r, m_, &s->tokens));
    const uint32_t positions = uint32_t(s->tokens.size());
    CACT_RETURN_IF_ERROR(s->kv.ReadRows(r, positions));
    s->eng_hist.resize(engram_.size());
    for (std::vector<float>& ring : s->eng_hist)
      CACT_RETURN_IF_ERROR(
          state_bytes::GetFloats(r, "engram history", size_t(hist_len_) * g_.d_model, &ring));
    CACT_RETURN_IF_ERROR(
        state_bytes::GetHidden(r, opt_.keep_hidden, positions, m_, &s->hidden));
    CACT_RETURN_IF_ERROR(r.ExpectEnd("the state"));
    return s;
  }

 private:
  // The prepared inputs of the matrix products (one set per thread for decode).
  struct Inputs {
    SharedInput mhc, attn, out, engram, logits;
  };

  // The matrices whose products run, each with the file records its kernels read without
  // tiles (an mHC stack reads rows of the three phi records).
  struct MultipliedMatrix {
    FastMatrix* matrix;
    std::vector<const MatrixView*> records;
  };
  std::vector<MultipliedMatrix> MultipliedMatrices(const Model& model) {
    std::vector<MultipliedMatrix> out = {{&embedding_, {&model.embedding()}}};
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerWeights& lw = model.layers()[l];
      FastLayer& fl = layers_[l];
      out.push_back({&fl.q, {&lw.q_proj}});
      out.push_back({&fl.k, {&lw.k_proj}});
      out.push_back({&fl.v, {&lw.v_proj}});
      out.push_back({&fl.gate, {&lw.gate_proj}});
      out.push_back({&fl.out, {&lw.out_proj}});
    }
    const MhcWeights& mhc = model.mhc();
    if (mhc_stack_.empty()) {
      out.push_back({&phi_pre_, {&mhc.phi_pre}});
      out.push_back({&phi_post_, {&mhc.phi_post}});
      out.push_back({&phi_res_, {&mhc.phi_res}});
    }
    for (FastMatrix& stack : mhc_stack_)
      out.push_back({&stack, {&mhc.phi_pre, &mhc.phi_post, &mhc.phi_res}});
    for (size_t s = 0; s < engram_.size(); ++s) {
      out.push_back({&engram_[s].key, {&model.engram_sites()[s].key_proj}});
      out.push_back({&engram_[s].value, {&model.engram_sites()[s].value_proj}});
    }
    return out;
  }

  // The tiles of every product whose kernels read them, in one huge-page buffer (a few
  // faults to fill, a few TLB entries to stream per token). They replace the file's codes
  // matrix by matrix, so the copies never add up to a second model in the resident set.
  void BuildTiles(const Model& model) {
    const std::vector<MultipliedMatrix> mms = MultipliedMatrices(model);
    uint64_t total = 0;
    for (const MultipliedMatrix& mm : mms) total += mm.matrix->TileBytesIfRead();
    if (total == 0) return;
    std::shared_ptr<uint8_t> buffer = AllocateHugePageBuffer(total);
    if (!buffer) return;  // the products read the file's rows instead
    // A record leaves the resident set once the last matrix reading it has its tiles.
    std::map<const MatrixView*, int> readers;
    for (const MultipliedMatrix& mm : mms)
      for (const MatrixView* record : mm.records) ++readers[record];
    uint64_t offset = 0;
    for (const MultipliedMatrix& mm : mms) {
      const uint64_t bytes = mm.matrix->TileBytesIfRead();
      if (bytes == 0) continue;
      mm.matrix->BuildTiles(buffer.get() + offset, buffer);
      offset += bytes;
      for (const MatrixView* record : mm.records)
        if (--readers[record] == 0) model.file().bytes().ReleasePages(record->blob);
    }
  }

  // Per token this path reads through the mapping only the CQ records of its products
  // without tiles (engram table rows with pread, the embedding's rows on demand, everything
  // else copied at load): the rest of the file leaves the resident set and cannot be mapped
  // along with them (FileBytes).
  void ReleaseColdFilePages(const Model& model) {
    std::vector<std::span<const uint8_t>> hot;
    for (const MultipliedMatrix& mm : MultipliedMatrices(model))
      if (!mm.matrix->has_tiles())
        for (const MatrixView* record : mm.records)
          if (record->is_cq()) hot.push_back(record->blob);
    model.file().bytes().ReleaseColdPages(std::move(hot));
  }

  // Tokens p0 .. p0+n-1 (already appended to tokens_); logits of chunk tokens >= first go
  // to `logits` (row t - first), if not null.
  void RunChunk(uint32_t p0, uint32_t n, uint32_t first, float* logits) {
    const uint32_t L = g_.num_layers;
    if (opt_.keep_hidden) {
      // Room for the whole context up front: growing a step at a time would copy the record
      // and fault in fresh pages at every doubling. Untouched capacity costs no memory.
      std::vector<float>& h = hidden_.by_position();
      if (h.capacity() == 0) h.reserve(size_t(g_.max_seq_len) * L * g_.d_model);
      h.resize(size_t(p0 + n - hidden_.first()) * L * g_.d_model);
    }
    act_.AllocateTokenBuffers();
    RopeTable(p0, n);
    if (n > 1) {
      Inputs& in = inputs_[0];
      const uint32_t d = g_.d_model, md = g_.mhc_lanes * d, A = g_.attn_dim();
      TokenBuffers& b = act_.chunk;
      in.mhc.Begin(b.nx.data(), n, md, md);
      in.attn.Begin(b.h.data(), n, d, d);
      in.out.Begin(act_.o.data(), n, A, A);
      in.engram.Begin(act_.eng_rows.data(), n, EngramIn(), EngramIn());
      // The final norm of token t goes to its own h row (free after its post-mix).
      if (logits) in.logits.Begin(b.h.data() + size_t(first) * d, n - first, d, d);
    }
    team_.Run([&](uint32_t me, uint32_t nt) {
      if (n == 1)
        Decode(p0, me, nt, logits);
      else
        Prefill(p0, n, first, logits, me, nt);
    });
    // The engram history ring takes the chunk's raw values (read during the chunk).
    const uint32_t d = g_.d_model;
    for (size_t s = 0; s < engram_.size(); ++s)
      for (uint32_t t = n > hist_len_ ? n - hist_len_ : 0; t < n; ++t)
        std::memcpy(&eng_hist_[s][size_t((p0 + t) % hist_len_) * d],
                    &act_.eng_vraw[s][size_t(t) * d], d * sizeof(float));
  }

  // ---- decode: one token. Every thread repeats the per-token work in its private
  // buffers, the layer's small mHC projections (24 rows) included, and takes a share of
  // the other products and of the KV heads, so a layer needs two barriers: sharing the
  // per-token work (~0.2 ms of a ~0.7 ms token) would add four barriers per layer, each of
  // which costs 0.5-1 us of waiting on two threads (docs/benchmarks.md).
  void Decode(uint32_t pos, uint32_t me, uint32_t nt, float* logits) {
    TokenBuffers& b = act_.priv[me];
    Inputs& in = inputs_[me];
    const uint32_t d = g_.d_model;
    EmbedToken(pos, b.X.data());
    std::vector<const float*> ev(engram_.size());
    for (size_t s = 0; s < engram_.size(); ++s) ev[s] = DecodeEngramMemory(s, pos, in, me, nt);
    for (uint32_t l = 0; l < g_.num_layers; ++l) DecodeLayer(l, pos, in, ev, me, nt);
    if (logits) {
      float* y = b.h.data();
      LaneMean(b.X.data(), y);
      ops::Zcn(y, m_.final_norm().data(), d, b_.norm_eps, y);
      in.logits.Prepare(y, 1, d, d);
      Products(in.logits, embedding_, 0, g_.vocab, 1, logits, me, nt);
    }
  }

  // Site s's key (shared: eng_k) and convolved value (this thread's eng_v slot, returned)
  // of token pos. One barrier.
  const float* DecodeEngramMemory(size_t s, uint32_t pos, Inputs& in, uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model;
    float* rows = act_.EngramRowsOf(me);
    GatherEngramRows(s, pos, rows);
    in.engram.Prepare(rows, 1, EngramIn(), EngramIn());
    Products(in.engram, engram_[s].key, 0, d, 1, act_.eng_k[s].data(), me, nt);
    Products(in.engram, engram_[s].value, 0, d, 1, act_.eng_vraw[s].data(), me, nt);
    team_.Barrier();
    float* v = act_.eng_v[me * engram_.size() + s].data();
    EngramConv(s, pos, pos, v);
    return v;
  }

  void DecodeLayer(uint32_t l, uint32_t pos, Inputs& in, const std::vector<const float*>& ev,
                   uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model, md = g_.mhc_lanes * d, A = g_.attn_dim();
    TokenView tv = act_.DecodeView(me, l);
    // Pre-mix: nx, all of the mHC projections (no barrier), u.
    PreMixNx(tv);
    in.mhc.Prepare(tv.nx, 1, md, md);
    PreMixProjections(in.mhc, l, 1, 0, 1, act_.MhcPrivate(me, l), act_.MhcStride());
    PreMixU(l, tv);
    const int site = m_.layer(l).engram_site;
    if (site >= 0) EngramInject(tv, &act_.eng_k[site][0], ev[site]);
    // Attention: norm_in, this thread's KV heads | out_proj's share | gated residual.
    AttentionIn(l, tv);
    in.attn.Prepare(tv.h, 1, d, d);
    DecodeAttentionHeads(l, pos, in, tv, me, nt);
    team_.Barrier();
    in.out.Prepare(act_.o.data(), 1, A, A);
    Products(in.out, layers_[l].out, 0, d, 1, act_.out.data(), me, nt);
    team_.Barrier();
    AttentionOut(l, tv);
    HadamardMlp(l, tv);
    PostMix(l, tv, opt_.keep_hidden && me == 0 ? HiddenRow(pos, l) : nullptr);
  }

  // Decode's share of the attention: the query/gate/key/value rows of this thread's KV
  // heads, then their key/value stores and attention (no other thread reads those rows).
  void DecodeAttentionHeads(uint32_t l, uint32_t pos, Inputs& in, TokenView& tv, uint32_t me,
                            uint32_t nt) {
    const FastLayer& fl = layers_[l];
    const uint32_t A = g_.attn_dim(), K = g_.kv_dim();
    const uint32_t hd = g_.head_dim, KVH = g_.num_kv_heads, per_kv = g_.num_heads / KVH;
    const uint32_t h0 = KVH * me / nt, h1 = KVH * (me + 1) / nt;
    const uint32_t qa = h0 * per_kv * hd, qb = h1 * per_kv * hd;
    in.attn.Apply(fl.q, 1, qa, qb, tv.q, A);
    in.attn.Apply(fl.gate, 1, qa, qb, tv.gate, A);
    in.attn.Apply(fl.k, 1, h0 * hd, h1 * hd, tv.k, K);
    in.attn.Apply(fl.v, 1, h0 * hd, h1 * hd, tv.v, K);
    for (uint32_t kvh = h0; kvh < h1; ++kvh) {
      StoreKv(l, kvh, pos, 0, tv);
      AttendHeads(l, kvh, pos, 0, tv, me);
    }
  }

  // ---- prefill: a chunk of tokens. Per-token work is shared out by token (strided),
  // products by 16-row blocks, attention by KV head; each input is prepared token by
  // token right where it is computed. Seven barriers per layer: repeating the chunk's
  // per-token work on every thread, as decode does, would repeat up to 16 tokens of it
  // (the bulk of prefill's time outside the products and attention, docs/benchmarks.md,
  // prefill profile).
  void Prefill(uint32_t p0, uint32_t n, uint32_t first, float* logits, uint32_t me, uint32_t nt) {
    Inputs& in = inputs_[0];
    for (uint32_t t = me; t < n; t += nt) {
      TokenView tv = act_.View(act_.chunk, t, 0);
      EmbedToken(p0 + t, tv.X);
      PreMixNx(tv);
      in.mhc.PrepareToken(t);
    }
    PrefillEngramMemory(p0, n, in, me, nt);
    team_.Barrier();
    for (uint32_t l = 0; l < g_.num_layers; ++l) PrefillLayer(l, p0, n, first, logits, in, me, nt);
    if (logits) Products(in.logits, embedding_, 0, g_.vocab, n - first, logits, me, nt);
  }

  // Every site's keys (eng_k) and convolved values (eng_v) of the chunk's tokens.
  void PrefillEngramMemory(uint32_t p0, uint32_t n, Inputs& in, uint32_t me, uint32_t nt) {
    const uint32_t d = g_.d_model;
    for (size_t s = 0; s < engram_.size(); ++s) {
      for (uint32_t t = me; t < n; t += nt) {
        GatherEngramRows(s, p0 + t, &act_.eng_rows[size_t(t) * EngramIn()]);
        in.engram.PrepareToken(t);
      }
      team_.Barrier();
      Products(in.engram, engram_[s].key, 0, d, n, act_.eng_k[s].data(), me, nt);
      Products(in.engram, engram_[s].value, 0, d, n, act_.eng_vraw[s].data(), me, nt);
      team_.Barrier();
      for (uint32_t t = me; t < n; t += nt)
        EngramConv(s, p0, p0 + t, &act_.eng_v[s][size_t(t) * d]);
      // (the next site's gather writes eng_rows, read by this site's products: both
      // finished before the barrier above)
    }
  }

  void PrefillLayer(uint32_t l, uint32_t p0, uint32_t n, uint32_t first, float* logits, Inputs& in,
                    uint32_t me, uint32_t nt) {
    TokenBuffers& b = act_.chunk;
    const FastLayer& fl = layers_[l];
    const uint32_t d = g_.d_model, A = g_.attn_dim(), K = g_.kv_dim(), KVH = g_.num_kv_heads;
    // Pre-mix: the mHC projections (nx prepared by the embedding or the previous layer).
    PreMixProjections(in.mhc, l, n, me, nt, act_.MhcOut(l), act_.MhcStride());
    team_.Barrier();
    // Pre-mix u, engram injection, attention's norm_in, by token.
    const int site = m_.layer(l).engram_site;
    for (uint32_t t = me; t < n; t += nt) {
      TokenView tv = act_.View(b, t, l);
      PreMixU(l, tv);
      if (site >= 0)
        EngramInject(tv, &act_.eng_k[site][size_t(t) * d], &act_.eng_v[site][size_t(t) * d]);
      AttentionIn(l, tv);
      in.attn.PrepareToken(t);
    }
    team_.Barrier();
    // Attention: q/k/v/gate | heads | out_proj's input | out_proj.
    Products(in.attn, fl.q, 0, A, n, b.q.data(), me, nt);
    Products(in.attn, fl.k, 0, K, n, b.k.data(), me, nt);
    Products(in.attn, fl.v, 0, K, n, b.v.data(), me, nt);
    Products(in.attn, fl.gate, 0, A, n, b.gate.data(), me, nt);
    team_.Barrier();
    // By KV head, kAttendBlock tokens at a time: store their keys/values, then attend
    // (so the ring never holds more than the window + kAttendBlock - 1).
    for (uint32_t kvh = KVH * me / nt; kvh < KVH * (me + 1) / nt; ++kvh)
      for (uint32_t t0 = 0; t0 < n; t0 += kAttendBlock) {
        const uint32_t nb = std::min(kAttendBlock, n - t0);
        for (uint32_t t = t0; t < t0 + nb; ++t) {
          TokenView tv = act_.View(b, t, l);
          StoreKv(l, kvh, p0 + t, t, tv);
        }
        AttendHeadsBlock(l, kvh, p0, t0, nb, me);
      }
    team_.Barrier();
    for (uint32_t t = me; t < n; t += nt) in.out.PrepareToken(t);
    team_.Barrier();
    Products(in.out, fl.out, 0, d, n, act_.out.data(), me, nt);
    team_.Barrier();
    // Gated residual, Hadamard MLP, post-mix, by token; then the next layer's nx, or after
    // the last layer the logits' input.
    const bool last = l + 1 == g_.num_layers;
    for (uint32_t t = me; t < n; t += nt) {
      TokenView tv = act_.View(b, t, l);
      AttentionOut(l, tv);
      HadamardMlp(l, tv);
      PostMix(l, tv, opt_.keep_hidden ? HiddenRow(p0 + t, l) : nullptr);
      if (!last) {
        PreMixNx(tv);
        in.mhc.PrepareToken(t);
      } else if (logits && t >= first) {
        float* y = tv.h;  // this token's h is free after its post-mix
        LaneMean(tv.X, y);
        ops::Zcn(y, m_.final_norm().data(), d, b_.norm_eps, y);
        in.logits.PrepareToken(t - first);
      }
    }
    team_.Barrier();
  }

  // ---- per-token pieces --------------------------------------------------------------

  // Products of one shared input for tokens < n, split over the team.
  void Products(const SharedInput& in, const FastMatrix& mat, uint32_t rb, uint32_t re, uint32_t n,
                float* y, uint32_t me, uint32_t nt) {
    kn::RowRange r = SplitRange(rb, re, nt, me);
    in.Apply(mat, n, r.begin, r.end, y, mat.rows());
  }

  // ---- pre-mix: nx = rms_unit(X), the mHC projections of nx, u = sum_j h_pre[j] X[j] --

  void PreMixNx(TokenView& tv) {
    ops::RmsUnit(tv.X, size_t(g_.mhc_lanes) * g_.d_model, b_.norm_eps, tv.nx);
  }

  // Layer l's mHC projections (pre: m rows, post: m, res: m*m) of tokens < n, into y
  // [token][pre | post | res] (token stride `stride`; y is layer l's slot of mhc_out or of
  // a thread's mhc_priv, both [token][layer][...]): this thread's share (me of nt) of the
  // stacked product's 16-row blocks, else of each of three products.
  void PreMixProjections(const SharedInput& in, uint32_t l, uint32_t n, uint32_t me, uint32_t nt,
                         float* y, size_t stride) {
    const uint32_t m = g_.mhc_lanes;
    if (!mhc_stack_.empty()) {
      const kn::RowRange r = SplitRange(0, act_.MhcRows(), nt, me);
      in.Apply(mhc_stack_[l], n, r.begin, r.end, y, stride);
      return;
    }
    // The products write row r of their matrix at y[r]: shift each so the layer's first
    // row lands on its slot (the shifted pointers stay inside the buffer, which holds every
    // layer's slots: l * m <= l * MhcRows()).
    struct Part {
      const FastMatrix* matrix;
      uint32_t begin, end;
      float* y;
    };
    const Part parts[3] = {{&phi_pre_, l * m, l * m + m, y - l * m},
                           {&phi_post_, l * m, l * m + m, y + m - l * m},
                           {&phi_res_, l * m * m, (l + 1) * m * m, y + 2 * m - l * m * m}};
    for (const Part& p : parts) {
      const kn::RowRange r = SplitRange(p.begin, p.end, nt, me);
      in.Apply(*p.matrix, n, r.begin, r.end, p.y, stride);
    }
  }

  // u = sum_j h_pre[j] X[j] (pre_off: the block's offset of the selected lane or of the
  // others); bx = u.
  void PreMixU(uint32_t l, TokenView& tv) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes, selected = l % m;
    const MhcWeights& mhc = m_.mhc();
    float hp_small[16];
    std::vector<float> hp_big(m > 16 ? m : 0);
    float* hp = m > 16 ? hp_big.data() : hp_small;
    for (uint32_t j = 0; j < m; ++j) {
      const float off = j == selected ? b_.pre_offset_selected : b_.pre_offset_other;
      hp[j] = mhc.a_pre[l] * tv.pre[j] + mhc.b_pre[l * m + j] + off;
    }
    kn::SigmoidInPlace(hp, m);
    // Per lane j in order (u starts at 0): hp[j] held in a local and restrict pointers so
    // the loop vectorizes (it reloaded hp[j] per element, ~5 % of prefill).
    float* __restrict u = tv.u;
    std::fill(u, u + d, 0.f);
    for (uint32_t j = 0; j < m; ++j) {
      const float w = hp[j];
      const float* __restrict xj = tv.X + size_t(j) * d;
      for (uint32_t c = 0; c < d; ++c) u[c] += w * xj[c];
    }
    std::memcpy(tv.bx, u, d * sizeof(float));
  }

  // ---- engram injection: bx = u + sigmoid(rms_unit(u) . rms_unit(k) / sqrt(d)) * v ----
  void EngramInject(TokenView& tv, const float* ek, const float* ev) {
    const uint32_t d = g_.d_model;
    // rms_unit(u) into h and rms_unit(k) into z (both free until written later in the layer).
    ops::RmsUnit(tv.u, d, b_.norm_eps, tv.h);
    ops::RmsUnit(ek, d, b_.norm_eps, tv.z);
    float alpha = ops::Dot(tv.h, tv.z, d) / std::sqrt(float(d));
    kn::SigmoidInPlace(&alpha, 1);
    for (uint32_t c = 0; c < d; ++c) tv.bx[c] = tv.u[c] + alpha * ev[c];
  }

  uint32_t EngramIn() const { return act_.EngramIn(); }
  float* HiddenRow(uint32_t pos, uint32_t l) {
    return &hidden_.by_position()[(size_t(pos - hidden_.first()) * g_.num_layers + l) *
                                  g_.d_model];
  }

  void EmbedToken(uint32_t pos, float* X) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes;
    const float scale = std::sqrt(float(d));
    // With tiles the logits no longer read the file's code pages: the row is read with
    // pread, so a long session's tokens do not map them back in.
    if (embedding_.has_tiles())
      ReadAndDecodeRow(m_.file().bytes(), m_.embedding(), uint32_t(tokens_[pos]), X);
    else
      DecodeRow(m_.embedding(), uint32_t(tokens_[pos]), X);
    for (uint32_t c = 0; c < d; ++c) X[c] *= scale;
    for (uint32_t j = 1; j < m; ++j) std::memcpy(X + j * d, X, d * sizeof(float));
  }

  // The T table rows of site s for position pos, read from the file's encoded rows.
  void GatherEngramRows(size_t s, uint32_t pos, float* rows) {
    const MatrixView& tables = m_.engram_sites()[s].tables;
    auto file_row = [&](uint32_t row, float* out) {
      ReadAndDecodeRow(m_.file().bytes(), tables, row, out);
    };
    steps::GatherEngramRows(g_, tokens_, pos, file_row, rows);
  }

  // Site s's causal depthwise convolution at pos: positions of the current chunk (p0 ..)
  // come from eng_vraw (chunk row = position - p0), earlier ones from the history ring.
  void EngramConv(size_t s, uint32_t p0, uint32_t pos, float* out) const {
    const uint32_t d = g_.d_model;
    const std::vector<float>& vraw = act_.eng_vraw[s];
    const std::vector<float>& hist = eng_hist_[s];
    auto value_at = [&](uint32_t src) {
      return src >= p0 ? &vraw[size_t(src - p0) * d] : &hist[size_t(src % hist_len_) * d];
    };
    steps::EngramConv(g_, m_.engram_sites()[s].taps.data(), pos, value_at, out);
  }

  // RoPE cos/sin of positions p0 .. p0+n-1.
  void RopeTable(uint32_t p0, uint32_t n) {
    const uint32_t hd = g_.head_dim;
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t i = 0; i < hd / 2; ++i) {
        const float angle = float(p0 + t) * inv_freq_[i];
        act_.rope[size_t(t) * hd + i] = std::cos(angle);
        act_.rope[size_t(t) * hd + hd / 2 + i] = std::sin(angle);
      }
  }

  void Rope(float* x, uint32_t t) const {
    const uint32_t hd = g_.head_dim, half = hd / 2;
    const float* cs = &act_.rope[size_t(t) * hd];
    for (uint32_t i = 0; i < half; ++i) {
      const float c = cs[i], s = cs[half + i];
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * c - x2 * s;
      x[i + half] = x2 * c + x1 * s;
    }
  }

  // ---- attention: h = ZCN(bx, norm_in); q/k/v/gate; attention; gate; out_proj; ZCN
  // post_norm; gated residual. The products are the schedules'; these are the per-token
  // and per-head pieces.

  void AttentionIn(uint32_t l, TokenView& tv) {
    ops::Zcn(tv.bx, m_.layer(l).norm_in.data(), g_.d_model, b_.norm_eps, tv.h);
  }

  // Normalise + rotate the key of KV head kvh and store key and value in the cache.
  void StoreKv(uint32_t l, uint32_t kvh, uint32_t pos, uint32_t t, TokenView& tv) {
    const uint32_t hd = g_.head_dim;
    float* kk = tv.k + kvh * hd;
    ops::Zcn(kk, m_.layer(l).k_norm.data(), hd, b_.norm_eps, kk);
    Rope(kk, t);
    kv_.Store(l, kvh, pos, kk, tv.v + kvh * hd);
  }

  // The query heads reading KV head kvh: normalise, rotate, attend, gate.
  void AttendHeads(uint32_t l, uint32_t kvh, uint32_t pos, uint32_t t, TokenView& tv, uint32_t me) {
    const uint32_t hd = g_.head_dim, per_kv = g_.num_heads / g_.num_kv_heads;
    float* scratch = &act_.attn_scratch[size_t(me) * act_.AttnScratch(kv_.rows())];
    float* qq = tv.q + kvh * per_kv * hd;
    for (uint32_t i = 0; i < per_kv; ++i) {
      ops::Zcn(qq + i * hd, m_.layer(l).q_norm.data(), hd, b_.norm_eps, qq + i * hd);
      Rope(qq + i * hd, t);
    }
    float* o = tv.o + kvh * per_kv * hd;
    kv_.Attend(l, kvh, pos, qq, per_kv, o, scratch);
    float* gt = tv.gate + kvh * per_kv * hd;
    kn::SigmoidInPlace(gt, per_kv * hd);
    for (uint32_t c = 0; c < per_kv * hd; ++c) o[c] *= gt[c];
  }

  // AttendHeads for chunk tokens t0 .. t0+nb-1 at once (KvCache::AttendBlock).
  void AttendHeadsBlock(uint32_t l, uint32_t kvh, uint32_t p0, uint32_t t0, uint32_t nb,
                        uint32_t me) {
    const uint32_t hd = g_.head_dim, per_kv = g_.num_heads / g_.num_kv_heads, A = g_.attn_dim();
    const size_t head0 = size_t(kvh) * per_kv * hd;
    for (uint32_t t = t0; t < t0 + nb; ++t) {
      float* qq = &act_.chunk.q[t * A + head0];
      for (uint32_t i = 0; i < per_kv; ++i) {
        ops::Zcn(qq + i * hd, m_.layer(l).q_norm.data(), hd, b_.norm_eps, qq + i * hd);
        Rope(qq + i * hd, t);
      }
    }
    float* scratch = &act_.attn_scratch[size_t(me) * act_.AttnScratch(kv_.rows())];
    kv_.AttendBlock(l, kvh, p0 + t0, nb, &act_.chunk.q[t0 * A + head0], A, per_kv,
                    &act_.o[t0 * A + head0], A, scratch);
    for (uint32_t t = t0; t < t0 + nb; ++t) {
      float* o = &act_.o[t * A + head0];
      float* gt = &act_.chunk.gate[t * A + head0];
      kn::SigmoidInPlace(gt, per_kv * hd);
      for (uint32_t c = 0; c < per_kv * hd; ++c) o[c] *= gt[c];
    }
  }

  // x += sigmoid(attn_gate) * ZCN(out_proj output, post_norm), with x = bx.
  void AttentionOut(uint32_t l, TokenView& tv) {
    const uint32_t d = g_.d_model;
    const LayerWeights& lw = m_.layer(l);
    float* x = tv.bx;
    // out_proj's output is shared (other threads read it too): normalise into h.
    float* out = tv.h;
    ops::Zcn(tv.out, lw.post_norm.data(), d, b_.norm_eps, out);
    float ag = lw.attn_gate;
    kn::SigmoidInPlace(&ag, 1);
    for (uint32_t c = 0; c < d; ++c) x[c] += ag * out[c];
  }

  // ---- Hadamard MLP: x += (d3 * FWHT(silu(d2 * FWHT(d1 * ZCN(x)))))[:d], x = bx ------
  void HadamardMlp(uint32_t l, TokenView& tv) {
    const uint32_t d = g_.d_model, nh = g_.hada_n;
    const LayerWeights& lw = m_.layer(l);
    float* x = tv.bx;
    float* z = tv.z;
    std::fill(z, z + nh, 0.f);
    ops::Zcn(x, lw.pre_hada.data(), d, b_.norm_eps, z);
    for (uint32_t i = 0; i < nh; ++i) z[i] *= lw.d1[i];
    kn::FwhtOrthonormal(z, nh);
    for (uint32_t i = 0; i < nh; ++i) z[i] *= lw.d2[i];
    kn::SiluInPlace(z, nh);
    kn::FwhtOrthonormal(z, nh);
    for (uint32_t c = 0; c < d; ++c) x[c] += lw.d3[c] * z[c];
  }

  // ---- mHC post-mix: X <- sum_j P[i][j] X[j] + h_post[i] (x - u), P = Sinkhorn(...) ---
  // `hidden` (if not null) takes the new lane mean.
  void PostMix(uint32_t l, TokenView& tv, float* hidden) {
    const uint32_t d = g_.d_model, m = g_.mhc_lanes, md = m * d;
    const MhcWeights& mhc = m_.mhc();
    const uint32_t selected = l % m;
    // Lanes beyond 8 (legal in the format, never used) take heap scratch.
    float hpost_small[16], P_small[64];
    std::vector<float> big(m > 8 ? m + size_t(m) * m : 0);
    float* hpost = m > 8 ? big.data() : hpost_small;
    float* P = m > 8 ? big.data() + m : P_small;
    for (uint32_t i = 0; i < m; ++i) {
      const float off = i == selected ? b_.post_offset_selected : b_.post_offset_other;
      hpost[i] = mhc.a_post[l] * tv.post[i] + mhc.b_post[l * m + i] + off;
    }
    kn::SigmoidInPlace(hpost, m);
    for (uint32_t i = 0; i < m; ++i) hpost[i] *= b_.post_gain;
    for (uint32_t k = 0; k < m * m; ++k) P[k] = mhc.a_res[l] * tv.res[k] + mhc.b_res[l * m * m + k];
    SinkhornFast(P, m, b_.sinkhorn_iters);
    float* Xn = tv.nx;  // nx is free until the next layer
    kn::MixLanes(P, tv.X, hpost, tv.bx, tv.u, m, d, Xn);
    std::memcpy(tv.X, Xn, md * sizeof(float));
    if (hidden) LaneMean(tv.X, hidden);
  }

  void LaneMean(const float* X, float* mean) const {
    steps::LaneMean(X, g_.mhc_lanes, g_.d_model, mean);
  }

  const Model& m_;
  const Geometry& g_;
  const BlockSpec& b_;  // the model's block: its constants
  ForwardOptions opt_;
  int threads_ = 1;
  kn::Team team_;
  FastMatrix embedding_, phi_pre_, phi_post_, phi_res_;
  std::vector<FastMatrix> mhc_stack_;  // per layer [pre | post | res] rows; empty: separate
  std::vector<FastLayer> layers_;
  std::vector<FastEngramSite> engram_;
  std::vector<Inputs> inputs_;
  std::vector<float> inv_freq_;
  uint32_t hist_len_ = 1;

  // Sequence state.
  std::vector<int32_t> tokens_;
  KvCache kv_;
  std::vector<std::vector<float>> eng_hist_;  // per site: ring of raw values [hist_len][d]
  HiddenRecord hidden_;
  struct SavedState final : State {
    explicit SavedState(const KvCache& cache) : kv(cache) {}
    const FastForward* owner = nullptr;
    std::vector<int32_t> tokens;
    KvCache kv;
    std::vector<std::vector<float>> eng_hist;
    HiddenRecord hidden;
  };

  Activations act_;  // working memory (engine/activations.h)
  std::string name_;
};

}  // namespace

std::unique_ptr<Forward> MakeFastForward(const Model& model, const ForwardOptions& options,
                                         const FastForwardOptions& fast) {
  return std::make_unique<FastForward>(model, options, fast);
}

}  // namespace cact
