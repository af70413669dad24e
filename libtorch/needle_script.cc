#include "libtorch/needle_script.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace cact::torchscript {
namespace {

// A TorchScript float literal that reads back as the same double.
std::string FloatLit(double v) {
  std::string s = absl::StrFormat("%.17g", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string Int(uint64_t v) { return absl::StrCat(v); }

// Substitutes {NAME} placeholders shared by every source.
std::string Fill(std::string src, const ScriptConfig& c) {
  const Geometry& g = c.geometry;
  const BlockSpec& b = g.block();
  return absl::StrReplaceAll(src, {{"{D}", Int(g.d_model)},
                                   {"{H}", Int(g.num_heads)},
                                   {"{KV}", Int(g.num_kv_heads)},
                                   {"{G}", Int(g.num_kv_heads ? g.num_heads / g.num_kv_heads : 1)},
                                   {"{HD}", Int(g.head_dim)},
                                   {"{HALF}", Int(g.head_dim / 2)},
                                   {"{A}", Int(g.attn_dim())},
                                   {"{N}", Int(g.hada_n)},
                                   {"{NPAD}", Int(g.hada_n - g.d_model)},
                                   {"{M}", Int(g.mhc_lanes)},
                                   {"{MM}", Int(uint64_t(g.mhc_lanes) * g.mhc_lanes)},
                                   {"{MD}", Int(uint64_t(g.mhc_lanes) * g.d_model)},
                                   {"{L1}", Int(g.num_layers + 1)},
                                   {"{S}", Int(g.engram_slots)},
                                   {"{PAD}", Int(c.pad_id)},
                                   {"{SQRT_D}", FloatLit(std::sqrt(double(g.d_model)))},
                                   {"{SQRT_HD}", FloatLit(std::sqrt(double(g.head_dim)))},
                                   {"{SQRT_N}", FloatLit(std::sqrt(double(g.hada_n)))},
                                   {"{THETA}", FloatLit(double(g.rope_theta))},
                                   {"{EPS}", FloatLit(double(b.norm_eps))},
                                   {"{PRE_SEL}", FloatLit(double(b.pre_offset_selected))},
                                   {"{PRE_OTHER}", FloatLit(double(b.pre_offset_other))},
                                   {"{POST_SEL}", FloatLit(double(b.post_offset_selected))},
                                   {"{POST_OTHER}", FloatLit(double(b.post_offset_other))},
                                   {"{POST_GAIN}", FloatLit(double(b.post_gain))},
                                   {"{SINKHORN_ITERS}", Int(uint64_t(b.sinkhorn_iters))},
                                   {"{HASH_PRIME}", Int(b.hash_prime)},
                                   {"{HASH_SHIFT}", Int(b.hash_shift)}});
}

// ZCN(x, g) = (1 + g) * x / sqrt(mean(x^2) + eps): the stored value is an offset.
constexpr const char* kNorms = R"(
def zcn(self, x: Tensor, g: Tensor) -> Tensor:
    return (1.0 + g) * x / torch.sqrt(torch.mean(x * x, -1, True) + {EPS})

def rms_unit(self, x: Tensor) -> Tensor:
    return x / torch.sqrt(torch.mean(x * x, -1, True) + {EPS})
)";

constexpr const char* kLayer = R"(
def rope(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x [B, T, heads, hd]; dimension i pairs with i + hd/2 (half split, not even/odd)
    x1 = x[:, :, :, :{HALF}]
    x2 = x[:, :, :, {HALF}:]
    c = cos.unsqueeze(1)
    s = sin.unsqueeze(1)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)

def fwht(self, x: Tensor) -> Tensor:
    # orthonormal Walsh-Hadamard transform (Sylvester order) over the last axis
    shape = x.shape
    y = x.reshape(-1, {N})
    h = 1
    while h < {N}:
        y = y.reshape(-1, {N} // (2 * h), 2, h)
        a = y[:, :, 0, :]
        b = y[:, :, 1, :]
        y = torch.stack([a + b, a - b], 2)
        h = h * 2
    return y.reshape(shape) / {SQRT_N}

def attention(self, bx: Tensor, cos: Tensor, sin: Tensor, visible: Tensor) -> Tensor:
    B = bx.size(0)
    T = bx.size(1)
    h = self.zcn(bx, self.norm_in)
    q = torch.matmul(h, self.q_proj.t()).reshape(B, T, {H}, {HD})
    k = torch.matmul(h, self.k_proj.t()).reshape(B, T, {KV}, {HD})
    v = torch.matmul(h, self.v_proj.t()).reshape(B, T, {KV}, {HD})
    q = self.rope(self.zcn(q, self.q_norm), cos, sin).transpose(1, 2)
    k = self.rope(self.zcn(k, self.k_norm), cos, sin).transpose(1, 2)
    v = v.transpose(1, 2)
    # query head h reads KV head h // G
    k = torch.repeat_interleave(k, {G}, 1)
    v = torch.repeat_interleave(v, {G}, 1)
    scores = torch.matmul(q, k.transpose(2, 3)) / {SQRT_HD}
    scores = scores.masked_fill(torch.logical_not(visible), float('-inf'))
    o = torch.matmul(torch.softmax(scores, -1), v)
    o = o.transpose(1, 2).reshape(B, T, {A})
    o = o * torch.sigmoid(torch.matmul(h, self.gate_proj.t()))
    o = self.zcn(torch.matmul(o, self.out_proj.t()), self.post_norm)
    return bx + torch.sigmoid(self.attn_gate) * o

def hadamard_mlp(self, x: Tensor) -> Tensor:
    # no post-norm, no gate
    B = x.size(0)
    T = x.size(1)
    z = self.zcn(x, self.pre_hada)
    if {NPAD} > 0:
        z = torch.cat([z, z.new_zeros([B, T, {NPAD}])], -1)
    z = self.fwht(self.d1 * z)
    z = self.d2 * z
    z = self.fwht(z * torch.sigmoid(z))
    return x + (self.d3 * z)[:, :, :{D}]
)";

constexpr const char* kEngramHead = R"(
def shift(self, x: Tensor, j: int) -> Tensor:
    # x[:, t - j] along axis 1, zeros before the start
    if j == 0:
        return x
    T = x.size(1)
    if j >= T:
        return torch.zeros_like(x)
    return torch.cat([torch.zeros_like(x[:, :j]), x[:, :T - j]], 1)

def forward(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
    # uint32 overflow arithmetic emulated in int64: acc < 2^32 and the prime < 2^31
    T = tokens.size(1)
    pos = torch.arange(T, device=tokens.device).unsqueeze(0).unsqueeze(-1)
    rows: List[Tensor] = []
)";

constexpr const char* kTopHelpers = R"(
def embed(self, tokens: Tensor) -> Tensor:
    return self.embedding[tokens] * {SQRT_D}

def rope_tables(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
    # angle p * theta^(-2i/hd), computed in float64
    T = tokens.size(1)
    i = torch.arange({HALF}, device=tokens.device).double()
    inv = torch.pow({THETA}, i * (-2.0 / {HD}))
    p = torch.arange(T, device=tokens.device).double()
    ang = p.unsqueeze(1) * inv.unsqueeze(0)
    dt = self.embedding.dtype
    return torch.cos(ang).to(dt), torch.sin(ang).to(dt)

def visibility(self, tokens: Tensor, window: Optional[int], sink: int) -> Tensor:
    # key k visible from query q iff k <= q and (no window or q - k < window or k < sink)
    T = tokens.size(1)
    q = torch.arange(T, device=tokens.device).unsqueeze(1)
    k = torch.arange(T, device=tokens.device).unsqueeze(0)
    vis = k <= q
    if window is not None:
        if window > 0:
            vis = vis & ((q - k < window) | (k < sink))
    return vis

def mhc_coeffs(self, X: Tensor, l: int) -> Tuple[Tensor, Tensor, Tensor]:
    B = X.size(0)
    T = X.size(1)
    nx = self.rms_unit(X.reshape(B, T, {MD}))
    pre = torch.matmul(nx, self.mhc_phi_pre[l * {M}:(l + 1) * {M}].t())
    post = torch.matmul(nx, self.mhc_phi_post[l * {M}:(l + 1) * {M}].t())
    res = torch.matmul(nx, self.mhc_phi_res[l * {MM}:(l + 1) * {MM}].t()).reshape(B, T, {M}, {M})
    # lane offsets: the selected value on lane l % m, the other elsewhere (exact: 1 * s + 0 * o)
    selected = (torch.arange({M}, device=X.device) == l % {M}).to(X.dtype)
    other = 1.0 - selected
    pre_offset = selected * ({PRE_SEL}) + other * ({PRE_OTHER})
    post_offset = selected * ({POST_SEL}) + other * ({POST_OTHER})
    h_pre = torch.sigmoid(self.mhc_a_pre[l] * pre + self.mhc_b_pre[l] + pre_offset)
    post_logit = self.mhc_a_post[l] * post + self.mhc_b_post[l] + post_offset
    h_post = {POST_GAIN} * torch.sigmoid(post_logit)
    a = self.mhc_a_res[l] * res + self.mhc_b_res[l]
    for it in range({SINKHORN_ITERS}):
        a = a - torch.logsumexp(a, -1, True)
        a = a - torch.logsumexp(a, -2, True)
    return h_pre, h_post, torch.exp(a)

def inject(self, bx: Tensor, k: Tensor, v: Tensor) -> Tensor:
    alpha = torch.sigmoid(torch.sum(self.rms_unit(bx) * self.rms_unit(k), -1, True) / {SQRT_D})
    return bx + alpha * v
)";

constexpr const char* kTopMethods = R"(
def forward(self, tokens: Tensor, window: Optional[int] = None, sink: int = 0) -> Tensor:
    X, hidden, e = self.trunk(tokens, window, sink)
    y = self.zcn(torch.mean(X, 2), self.final_norm)
    return torch.matmul(y, self.embedding.t())

def hidden_states(self, tokens: Tensor, window: Optional[int] = None, sink: int = 0) -> Tensor:
    X, hidden, e = self.trunk(tokens, window, sink)
    return hidden
)";

constexpr const char* kHeadHelpers = R"(
def pool_cells(self, tokens: Tensor, e: Tensor, hidden: Tensor, probes: Tensor) -> Tensor:
    # cells: the scaled embedding and the lane mean after every layer, for every token;
    # softmax over all cells of non-pad tokens, per probe
    B = tokens.size(0)
    T = tokens.size(1)
    cells = torch.cat([e.unsqueeze(0), hidden], 0).transpose(0, 1).reshape(B, {L1} * T, {D})
    valid = (tokens != {PAD}).unsqueeze(1).expand(B, {L1}, T).reshape(B, {L1} * T)
    scores = torch.matmul(cells, probes.t()) / {SQRT_D}
    scores = scores.masked_fill(torch.logical_not(valid).unsqueeze(-1), float('-inf'))
    w = torch.softmax(scores, 1)
    return torch.matmul(w.transpose(1, 2), cells).reshape(B, -1)
)";

constexpr const char* kConfidence = R"(
def confidence(self, tokens: Tensor, window: Optional[int] = None, sink: int = 0) -> Tensor:
    X, hidden, e = self.trunk(tokens, window, sink)
    pooled = self.pool_cells(tokens.long(), e, hidden, self.{HEAD}.probes)
    out = torch.matmul(pooled, self.{HEAD}.proj.t()) + self.{HEAD}.bias
    return out.squeeze(-1)
)";

constexpr const char* kRetrieval = R"(
def retrieval(self, tokens: Tensor, window: Optional[int] = None, sink: int = 0) -> Tensor:
    X, hidden, e = self.trunk(tokens, window, sink)
    pooled = self.pool_cells(tokens.long(), e, hidden, self.{HEAD}.probes)
    out = torch.matmul(pooled, self.{HEAD}.proj.t()) + self.{HEAD}.bias
    return out / torch.clamp_min(torch.sqrt(torch.sum(out * out, -1, True)), 1e-12)
)";

std::string TrunkSource(const ScriptConfig& c) {
  const Geometry& g = c.geometry;
  std::string s = R"(
def trunk(self, tokens: Tensor, window: Optional[int], sink: int) -> Tuple[Tensor, Tensor, Tensor]:
    # returns the lane state X [B, T, m, d], the lane means after each layer [L, B, T, d]
    # and the scaled embedding e [B, T, d]
    assert tokens.dim() == 2, "tokens must be [B, T]"
    tokens = tokens.long()
    e = self.embed(tokens)
    cos, sin = self.rope_tables(tokens)
    vis = self.visibility(tokens, window, sink)
)";
  for (uint32_t site = 0; site < g.num_engram_sites; ++site) {
    absl::StrAppendFormat(&s, "    mem%u_k, mem%u_v = self.%s.forward(tokens)\n", site, site,
                          EngramModuleName(site));
  }
  s += "    X = e.unsqueeze(2).repeat(1, 1, {M}, 1)\n";
  s += "    hidden: List[Tensor] = []\n";
  for (uint32_t l = 0; l < g.num_layers; ++l) {
    const std::string layer = LayerModuleName(l);
    for (BlockStage stage : g.block().stages) {
      switch (stage) {
        case BlockStage::kPreMix:
          absl::StrAppendFormat(&s, "    h_pre, h_post, P = self.mhc_coeffs(X, %u)\n", l);
          s += "    u = torch.matmul(h_pre.unsqueeze(-2), X).squeeze(-2)\n";
          s += "    bx = u\n";
          break;
        case BlockStage::kEngram:
          if (int site = g.EngramSiteAt(l); site >= 0) {
            absl::StrAppendFormat(&s, "    bx = self.inject(bx, mem%d_k, mem%d_v)\n", site, site);
          }
          break;
        case BlockStage::kAttention:
          absl::StrAppendFormat(&s, "    bx = self.%s.attention(bx, cos, sin, vis)\n", layer);
          break;
        case BlockStage::kHadamardMlp:
          absl::StrAppendFormat(&s, "    bx = self.%s.hadamard_mlp(bx)\n", layer);
          break;
        case BlockStage::kPostMix:
          // the update is taken against u, the value before the engram injection
          s += "    X = torch.matmul(P, X) + h_post.unsqueeze(-1) * (bx - u).unsqueeze(-2)\n";
          break;
      }
    }
    s += "    hidden.append(torch.mean(X, 2))\n";
  }
  s += "    return X, torch.stack(hidden, 0), e\n";
  return s;
}

}  // namespace

std::string LayerModuleName(uint32_t layer) { return absl::StrFormat("layer%02u", layer); }
std::string EngramModuleName(uint32_t site) { return absl::StrFormat("engram%u", site); }

absl::Status CheckScriptableBlock(const BlockSpec& b) {
  const std::string what =
      absl::StrCat("the libtorch executors cannot run block '", b.name, "': ");
  if (b.rope_pairing != RopePairing::kHalfSplit) {
    return absl::UnimplementedError(what + "its RoPE pairing is not the half split");
  }
  // The trunk keeps u (set by the pre-mix) for the post-mix's update: the pre-mix opens a
  // layer, the post-mix closes it, and every stage runs once.
  std::array<int, kBlockStages> seen{};
  for (BlockStage stage : b.stages) {
    const size_t i = size_t(stage);
    if (i >= seen.size() || seen[i]++) {
      return absl::InvalidArgumentError(what + "a stage is repeated or unknown");
    }
  }
  if (b.stages.front() != BlockStage::kPreMix || b.stages.back() != BlockStage::kPostMix) {
    return absl::InvalidArgumentError(what +
                                      "a layer must open with the pre-mix and close "
                                      "with the post-mix");
  }
  if (b.hash_prime >= (1u << 31) || b.hash_shift >= 32) {
    return absl::InvalidArgumentError(
        what +
        "the engram hash needs a prime below 2^31 (products of the int64 emulation "
        "stay below 2^63) and a shift below 32");
  }
  return absl::OkStatus();
}

std::string LayerSource(const ScriptConfig& c) { return Fill(std::string(kNorms) + kLayer, c); }

std::string EngramSource(const ScriptConfig& c) {
  const Geometry& g = c.geometry;
  std::string s = kEngramHead;
  const uint32_t per_order = g.heads_per_order();
  for (uint32_t t = 0; t < g.num_engram_tables; ++t) {
    const uint32_t order = g.engram_orders[per_order ? t / per_order : 0];
    absl::StrAppendFormat(&s, "    acc = torch.zeros_like(tokens) + %u\n",
                          EngramHashStart(g.block(), t));
    for (uint32_t j = 0; j < order; ++j) {
      absl::StrAppendFormat(
          &s, "    acc = ((acc ^ self.shift(tokens, %u)) * {HASH_PRIME}) & 4294967295\n", j);
    }
    s += "    acc = acc ^ (acc >> {HASH_SHIFT})\n";
    absl::StrAppendFormat(&s, "    row = self.tables[torch.remainder(acc, {S}) + %u]\n",
                          uint64_t(t) * g.engram_slots);
    // rows are zero until order-1 earlier tokens exist
    absl::StrAppendFormat(&s, "    rows.append(row * (pos >= %u).to(row.dtype))\n",
                          order > 0 ? order - 1 : 0);
  }
  s += "    e = torch.cat(rows, -1)\n";
  s += "    k = torch.matmul(e, self.key_proj.t())\n";
  s += "    v = torch.matmul(e, self.value_proj.t())\n";
  // causal depthwise dilated convolution: v'[t] = sum_j taps[j] * v[t - dilation*j]
  s += "    vc = self.taps[0] * v\n";
  for (uint32_t j = 1; j < g.engram_conv_taps; ++j) {
    absl::StrAppendFormat(&s, "    vc = vc + self.taps[%u] * self.shift(v, %u)\n", j,
                          j * g.engram_conv_dilation);
  }
  s += "    return k, vc\n";
  return Fill(s, c);
}

std::string TopSource(const ScriptConfig& c) {
  std::string s = std::string(kNorms) + kTopHelpers + TrunkSource(c) + kTopMethods;
  if (!c.heads.empty()) s += kHeadHelpers;
  for (const ProbeHeadSpec& h : c.heads) {
    const char* tmpl = h.kind == ProbeHead::kConfidence ? kConfidence : kRetrieval;
    s += absl::StrReplaceAll(tmpl, {{"{HEAD}", h.name()}});
  }
  return Fill(s, c);
}

}  // namespace cact::torchscript
