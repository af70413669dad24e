#include "libtorch/needle_net.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "formats/needle/block.h"
#include "formats/needle/tensor_table.h"
#include "libtorch/needle_script.h"  // CheckScriptableBlock

namespace cact::train {
namespace {

using torch::Tensor;
namespace idx = torch::indexing;

const Tensor& Get(const WeightMap& w, const std::string& name) {
  auto it = w.find(name);
  TORCH_CHECK(it != w.end(), "NeedleNet: no weight '", name, "'");
  return it->second;
}

std::string LayerName(uint32_t l, const char* what) {
  return absl::StrFormat("layer%02u.%s", l, what);
}

// ZCN(x, g) = (1 + g) * x / sqrt(mean(x^2) + eps): the stored gain is an offset from 1.
Tensor Zcn(const Tensor& x, const Tensor& g, double eps) {
  return (1.0 + g) * x * torch::rsqrt(torch::mean(x * x, -1, true) + eps);
}

Tensor RmsUnit(const Tensor& x, double eps) {
  return x * torch::rsqrt(torch::mean(x * x, -1, true) + eps);
}

// Sylvester-order Walsh matrix (entries +-1), n a power of two: the orthonormal transform of
// the spec is x @ H / sqrt(n), and H is symmetric.
Tensor WalshMatrix(int64_t n, torch::Dtype dtype) {
  Tensor h = torch::ones({1, 1}, torch::kFloat64);
  while (h.size(0) < n) {
    h = torch::cat({torch::cat({h, h}, 1), torch::cat({h, -h}, 1)}, 0);
  }
  return h.to(dtype);
}

// RoPE tables [T, hd/2]: angle p * theta^(-2i/hd), in float64 as the spec computes them.
std::pair<Tensor, Tensor> RopeTables(int64_t T, const Geometry& g, torch::Dtype dtype) {
  const int64_t half = g.head_dim / 2;
  Tensor i = torch::arange(half, torch::kFloat64);
  Tensor inv = torch::pow(double(g.rope_theta), i * (-2.0 / double(g.head_dim)));
  Tensor ang = torch::arange(T, torch::kFloat64).unsqueeze(1) * inv.unsqueeze(0);
  return {torch::cos(ang).to(dtype), torch::sin(ang).to(dtype)};
}

// Additive attention mask [T, T]: 0 where key k is visible from query q (k <= q, and within
// the window unless k is a sink token), -inf elsewhere.
Tensor AttentionMask(int64_t T, AttentionWindow w, torch::Dtype dtype) {
  Tensor q = torch::arange(T).unsqueeze(1);
  Tensor k = torch::arange(T).unsqueeze(0);
  Tensor vis = k <= q;
  if (w.window > 0) vis = vis & ((q - k < w.window) | (k < w.sink));
  return torch::zeros({T, T}, dtype).masked_fill(vis.logical_not(), -INFINITY);
}

// x[:, t - j] along axis 1, zeros before the start.
Tensor Shift(const Tensor& x, int64_t j) {
  if (j == 0) return x;
  const int64_t T = x.size(1);
  if (j >= T) return torch::zeros_like(x);
  return torch::cat({torch::zeros_like(x.narrow(1, 0, j)), x.narrow(1, 0, T - j)}, 1);
}

// RoPE with the half split: dimension i pairs with i + hd/2. x [B, T, heads, hd].
Tensor Rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t half) {
  Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

// The mHC lane state is kept as M separate [B, T, D] tensors: the per-token lane mixes
// (1 x M and M x M against M x D) become M^2 contiguous multiply-adds, where a batched
// matmul is B*T tiny GEMMs and a [.., M, D] layout makes autograd fill whole-state zero
// tensors for every lane it selects.
using Lanes = std::vector<Tensor>;

// sum_j c[..., j] * lanes[j] for coefficients c [B, T, M].
Tensor LaneSum(const Tensor& c, const Lanes& lanes) {
  Tensor acc = c.narrow(-1, 0, 1) * lanes[0];
  for (size_t j = 1; j < lanes.size(); ++j)
    acc = torch::addcmul(acc, c.narrow(-1, int64_t(j), 1), lanes[j]);
  return acc;
}

}  // namespace

NeedleNet::NeedleNet(const Geometry& g) : g_(g) {
  const absl::Status s = torchscript::CheckScriptableBlock(g_.block());
  TORCH_CHECK(s.ok(), "NeedleNet: ", s.message());
}

std::pair<Tensor, Tensor> NeedleNet::Engram(uint32_t site, const Tensor& tokens,
                                            const WeightMap& w) const {
  const std::string p = absl::StrFormat("engram%u.", site);
  const Tensor& tables = Get(w, p + "tables");
  const int64_t T = tokens.size(1);
  Tensor pos = torch::arange(T).unsqueeze(0).unsqueeze(-1);
  const uint32_t per_order = g_.heads_per_order();
  const BlockSpec& b = g_.block();
  std::vector<Tensor> rows;
  {
    // Table rows are picked by a hash of the last `order` tokens; uint32 arithmetic is
    // emulated in int64 (acc < 2^32 and the prime < 2^31). No gradient flows through it.
    torch::NoGradGuard no_grad;
    for (uint32_t t = 0; t < g_.num_engram_tables; ++t) {
      const uint32_t order = g_.engram_orders[per_order ? t / per_order : 0];
      Tensor acc = torch::full_like(tokens, int64_t(EngramHashStart(b, t)));
      for (uint32_t j = 0; j < order; ++j) {
        acc = torch::bitwise_and((acc ^ Shift(tokens, j)) * int64_t(b.hash_prime),
                                 int64_t{4294967295});
      }
      // acc >> shift (acc >= 0)
      acc = acc ^ torch::floor_divide(acc, int64_t{1} << b.hash_shift);
      rows.push_back(torch::remainder(acc, int64_t(g_.engram_slots)) +
                     int64_t(t) * g_.engram_slots);
    }
  }
  std::vector<Tensor> fetched;
  for (uint32_t t = 0; t < g_.num_engram_tables; ++t) {
    const uint32_t order = g_.engram_orders[per_order ? t / per_order : 0];
    Tensor row = torch::embedding(tables, rows[t]);  // [B, T, sub]
    // rows are zero until order-1 earlier tokens exist
    fetched.push_back(row * (pos >= int64_t(order > 0 ? order - 1 : 0)).to(row.dtype()));
  }
  Tensor e = torch::cat(fetched, -1);
  Tensor k = torch::matmul(e, Get(w, p + "key_proj").t());
  Tensor v = torch::matmul(e, Get(w, p + "value_proj").t());
  // causal depthwise dilated convolution: v'[t] = sum_j taps[j] * v[t - dilation*j]
  const Tensor& taps = Get(w, p + "taps");
  Tensor vc = taps[0] * v;
  for (uint32_t j = 1; j < g_.engram_conv_taps; ++j) {
    vc = vc + taps[j] * Shift(v, int64_t(j) * g_.engram_conv_dilation);
  }
  return {k, vc};
}

Tensor NeedleNet::Attention(uint32_t l, const Tensor& bx, const Tensor& cos, const Tensor& sin,
                            const Tensor& mask, const WeightMap& w,
                            std::vector<AttentionTap>* attention_taps) const {
  const int64_t B = bx.size(0), T = bx.size(1);
  const int64_t H = g_.num_heads, KV = g_.num_kv_heads, hd = g_.head_dim;
  const double eps = g_.block().norm_eps;
  Tensor h = Zcn(bx, Get(w, LayerName(l, "norm_in")), eps);
  Tensor q = torch::matmul(h, Get(w, LayerName(l, "q_proj")).t()).view({B, T, H, hd});
  Tensor k = torch::matmul(h, Get(w, LayerName(l, "k_proj")).t()).view({B, T, KV, hd});
  Tensor v = torch::matmul(h, Get(w, LayerName(l, "v_proj")).t()).view({B, T, KV, hd});
  q = Rope(Zcn(q, Get(w, LayerName(l, "q_norm")), eps), cos, sin, hd / 2).transpose(1, 2);
  k = Rope(Zcn(k, Get(w, LayerName(l, "k_norm")), eps), cos, sin, hd / 2).transpose(1, 2);
  v = v.transpose(1, 2);
  // query head h reads KV head h / G: group the query heads of one KV head together
  const int64_t G = KV ? H / KV : 1;
  Tensor qg = q.reshape({B, KV, G * T, hd});
  Tensor scores =
      torch::matmul(qg, k.transpose(2, 3)).view({B, KV, G, T, T}) / std::sqrt(double(hd));
  Tensor probs = torch::softmax(scores + mask, -1).view({B, KV, G * T, T});
  if (attention_taps) {
    for (AttentionTap& tap : *attention_taps) {
      if (tap.layer != l) continue;
      TORCH_CHECK(tap.head < H, "NeedleNet: no query head ", tap.head);
      tap.probs = probs.view({B, KV, G, T, T}).select(1, tap.head / G).select(1, tap.head % G);
    }
  }
  Tensor o = torch::matmul(probs, v).view({B, H, T, hd}).transpose(1, 2).reshape({B, T, H * hd});
  o = o * torch::sigmoid(torch::matmul(h, Get(w, LayerName(l, "gate_proj")).t()));
  o = Zcn(torch::matmul(o, Get(w, LayerName(l, "out_proj")).t()), Get(w, LayerName(l, "post_norm")),
          eps);
  return bx + torch::sigmoid(Get(w, LayerName(l, "attn_gate"))) * o;
}

Tensor NeedleNet::HadamardMlp(uint32_t l, const Tensor& x, const Tensor& walsh,
                              const WeightMap& w) const {
  const int64_t D = g_.d_model, N = g_.hada_n;
  // z padded to N with zeros, so only the first D rows/columns of H act; no post-norm, no gate
  const double inv_sqrt_n = 1.0 / std::sqrt(double(N));
  Tensor z = Zcn(x, Get(w, LayerName(l, "pre_hada")), g_.block().norm_eps);
  Tensor d1 = Get(w, LayerName(l, "d1")), d3 = Get(w, LayerName(l, "d3"));
  z = torch::matmul(d1.narrow(0, 0, D) * z, walsh.narrow(0, 0, D)) * inv_sqrt_n;
  z = Get(w, LayerName(l, "d2")) * z;
  z = torch::matmul(z * torch::sigmoid(z), walsh.narrow(1, 0, D)) * inv_sqrt_n;
  return x + d3.narrow(0, 0, D) * z;
}

Tensor NeedleNet::FinalHidden(const Tensor& tokens_in, const WeightMap& w, AttentionWindow window,
                              std::vector<AttentionTap>* attention_taps) const {
  TORCH_CHECK(tokens_in.dim() == 2, "tokens must be [B, T]");
  Tensor tokens = tokens_in.to(torch::kInt64);
  const Tensor& embedding = Get(w, "embedding");
  const auto dtype = embedding.scalar_type();
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const int64_t M = g_.mhc_lanes, D = g_.d_model;
  Tensor e = torch::embedding(embedding, tokens) * std::sqrt(double(D));
  auto [cos, sin] = RopeTables(T, g_, dtype);
  // [1, 1, T, T] against scores [B, KV, G, T, T]
  Tensor mask = AttentionMask(T, window, dtype);
  const Tensor walsh = WalshMatrix(g_.hada_n, dtype);  // shared by every layer
  std::vector<std::pair<Tensor, Tensor>> memory;
  for (uint32_t s = 0; s < g_.num_engram_sites; ++s) memory.push_back(Engram(s, tokens, w));

  const Tensor& phi_pre = Get(w, "mhc_phi_pre");
  const Tensor& phi_post = Get(w, "mhc_phi_post");
  const Tensor& phi_res = Get(w, "mhc_phi_res");
  const Tensor& a_pre = Get(w, "mhc_a_pre");
  const Tensor& a_post = Get(w, "mhc_a_post");
  const Tensor& a_res = Get(w, "mhc_a_res");
  const Tensor& b_pre = Get(w, "mhc_b_pre");
  const Tensor& b_post = Get(w, "mhc_b_post");
  const Tensor& b_res = Get(w, "mhc_b_res");
  const BlockSpec& b = g_.block();
  const double eps = b.norm_eps;
  Lanes X(size_t(M), e);
  for (uint32_t l = 0; l < g_.num_layers; ++l) {
    Tensor h_post, P, u, bx;  // set by the pre-mix, which opens every layer
    for (BlockStage stage : b.stages) {
      switch (stage) {
        case BlockStage::kPreMix: {
          // mHC coefficients from the normalised lane state; the three projections in one GEMM
          Tensor nx = RmsUnit(torch::cat(X, -1), eps);  // [B, T, M*D], lane-major
          Tensor phi = torch::cat({phi_pre.narrow(0, l * M, M), phi_post.narrow(0, l * M, M),
                                   phi_res.narrow(0, l * M * M, M * M)},
                                  0);
          Tensor c = torch::matmul(nx, phi.t());
          Tensor pre = c.narrow(-1, 0, M), post = c.narrow(-1, M, M);
          Tensor res = c.narrow(-1, 2 * M, M * M).view({B, T, M, M});
          // lane offsets: the selected value on lane l % M, the other elsewhere (exact)
          Tensor selected = (torch::arange(M) == int64_t(l % M)).to(dtype);
          Tensor other = 1.0 - selected;
          Tensor pre_offset =
              selected * double(b.pre_offset_selected) + other * double(b.pre_offset_other);
          Tensor post_offset =
              selected * double(b.post_offset_selected) + other * double(b.post_offset_other);
          Tensor h_pre = torch::sigmoid(a_pre[l] * pre + b_pre[l] + pre_offset);
          h_post = double(b.post_gain) * torch::sigmoid(a_post[l] * post + b_post[l] + post_offset);
          Tensor a = a_res[l] * res + b_res[l];
          for (int it = 0; it < b.sinkhorn_iters; ++it) {  // a doubly stochastic lane mix
            a = a - torch::logsumexp(a, -1, true);
            a = a - torch::logsumexp(a, -2, true);
          }
          P = torch::exp(a);
          // The lane mixes are tiny per token (1 x M and M x M against M x D): as sums over
          // the M lanes they are a few elementwise passes, where a batched matmul would be
          // B*T tiny GEMMs.
          u = LaneSum(h_pre, X);
          bx = u;
          break;
        }
        case BlockStage::kEngram:
          if (int site = g_.EngramSiteAt(l); site >= 0) {
            const auto& [mk, mv] = memory[site];
            Tensor alpha = torch::sigmoid(
                torch::sum(RmsUnit(bx, eps) * RmsUnit(mk, eps), -1, true) / std::sqrt(double(D)));
            bx = bx + alpha * mv;
          }
          break;
        case BlockStage::kAttention:
          bx = Attention(l, bx, cos, sin, mask, w, attention_taps);
          break;
        case BlockStage::kHadamardMlp:
          bx = HadamardMlp(l, bx, walsh, w);
          break;
        case BlockStage::kPostMix: {
          // the update is taken against u, the value before the engram injection
          Tensor delta = bx - u;
          Lanes next;
          for (int64_t i = 0; i < M; ++i) {
            next.push_back(LaneSum(P.select(-2, i), X) + h_post.narrow(-1, i, 1) * delta);
          }
          X = std::move(next);
          break;
        }
      }
    }
  }
  Tensor sum = X[0];
  for (int64_t j = 1; j < M; ++j) sum = sum + X[j];
  return Zcn(sum / double(M), Get(w, "final_norm"), eps);
}

Tensor NeedleNet::Logits(const Tensor& tokens, const WeightMap& w, AttentionWindow window,
                         std::vector<AttentionTap>* attention_taps) const {
  return torch::matmul(FinalHidden(tokens, w, window, attention_taps), Get(w, "embedding").t());
}

Tensor NextTokenLoss(const Tensor& logits, const Tensor& tokens, const Tensor& mask) {
  const int64_t T = logits.size(1), V = logits.size(2);
  Tensor lp = torch::log_softmax(logits.narrow(1, 0, T - 1).reshape({-1, V}), -1);
  Tensor target = tokens.narrow(1, 1, T - 1).reshape({-1}).to(torch::kInt64);
  Tensor nll = -lp.gather(1, target.unsqueeze(1)).squeeze(1);
  if (!mask.defined()) return nll.mean();
  Tensor m = mask.narrow(1, 1, T - 1).reshape({-1}).to(nll.scalar_type());
  return (nll * m).sum() / torch::clamp_min(m.sum(), 1.0);
}

WeightMap InitialWeights(const Geometry& g, uint64_t seed) {
  torch::manual_seed(seed);
  const double std0 = 0.02, std_res = 0.02 / std::sqrt(2.0 * g.num_layers);
  const int64_t L = g.num_layers, M = g.mhc_lanes;
  WeightMap w;
  for (const TensorSpec& s : CanonicalLayout(g, {})) {
    if (s.kind == TensorKind::kTokenizer) continue;
    std::vector<int64_t> shape(s.shape.begin(), s.shape.end());
    const std::string& n = s.name;
    auto ends = [&](const char* suffix) { return absl::EndsWith(n, suffix); };
    Tensor t;
    if (ends("out_proj") || ends("value_proj")) {
      t = torch::randn(shape) * std_res;
    } else if (s.kind == TensorKind::kMatrix) {
      t = torch::randn(shape) * std0;  // embedding, projections, mhc_phi, engram tables
    } else if (ends(".d1") || ends(".d2")) {
      t = torch::ones(shape);
    } else if (ends(".d3")) {
      t = torch::full(shape, 0.02);
    } else if (n == "mhc_a_pre" || n == "mhc_a_post" || n == "mhc_a_res") {
      t = torch::full(shape, 0.01);
    } else if (n == "mhc_b_res") {
      t = (4.0 * torch::eye(M)).expand({L, M, M}).contiguous();
    } else if (ends(".taps")) {
      t = torch::zeros(shape);
      t[0].fill_(1.0);
    } else {
      t = torch::zeros(shape);  // norm offsets, attn_gate, mhc_b_pre / b_post
    }
    w[n] = t.to(torch::kFloat32).contiguous();
  }
  return w;
}

absl::StatusOr<WeightMap> FromSafetensors(const Safetensors& st, const Geometry& g,
                                          const std::string& source) {
  WeightMap w;
  for (const FloatTensor& t : st.tensors) {
    std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
    w[t.name] = torch::from_blob(const_cast<float*>(t.data.data()), shape, torch::kFloat32).clone();
  }
  for (const TensorSpec& s : CanonicalLayout(g, {})) {
    if (s.kind == TensorKind::kTokenizer) continue;
    auto it = w.find(s.name);
    if (it == w.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tensor '", s.name, "' is missing (the geometry needs it)"));
    }
    std::vector<int64_t> want(s.shape.begin(), s.shape.end());
    if (it->second.sizes() != torch::IntArrayRef(want)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tensor '", s.name, "' has shape ", c10::str(it->second.sizes()),
                       ", the geometry needs ", c10::str(torch::IntArrayRef(want))));
    }
  }
  return w;
}

Safetensors ToSafetensors(const WeightMap& w, const Geometry& g) {
  Safetensors st;
  for (const TensorSpec& s : CanonicalLayout(g, {})) {
    if (s.kind == TensorKind::kTokenizer) continue;
    Tensor t = Get(w, s.name).detach().to(torch::kFloat32).contiguous();
    FloatTensor f;
    f.name = s.name;
    f.shape = s.shape;
    f.data.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    st.tensors.push_back(std::move(f));
  }
  return st;
}

int64_t ParameterCount(const WeightMap& w) {
  int64_t n = 0;
  for (const auto& [name, t] : w) n += t.numel();
  return n;
}

}  // namespace cact::train
