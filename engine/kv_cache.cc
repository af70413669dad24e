#include "engine/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>

#include "engine/kernels/fast_ops.h"

namespace cact {
namespace {

// One absmax/127 scale per vector, round to nearest even, clamp to [-127, 127].
void QuantizeRow(const float* x, uint32_t n, int8_t* q, float* scale) {
  kernels::QuantizeInt8(x, n, q, scale);
}

}  // namespace

KvCache::KvCache(uint32_t layers, uint32_t kv_heads, uint32_t head_dim, AttentionWindow attn,
                 uint32_t max_seq_len, uint32_t slack, kernels::ActPrecision query)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), attn_(attn), query_(query) {
  sink_rows_ = std::min(attn.sink, max_seq_len);
  const uint32_t rest = max_seq_len - sink_rows_;
  ring_rows_ = attn.window == 0 ? rest : std::min(rest, attn.window + slack);
  ring_rows_ = std::max(ring_rows_, 1u);
  const size_t n = size_t(layers) * kv_heads * rows();
  keys_.assign(size_t(layers) * kv_heads * kernels::KeyBytes(head_dim, rows()), 0);
  values_.assign(n * head_dim, 0);
  key_scale_.assign(n, 0.f);
  value_scale_.assign(n, 0.f);
  Reset();
}

void KvCache::Reset() { newest_.assign(size_t(layers_) * kv_heads_, -1); }

size_t KvCache::bytes() const {
  return keys_.size() + values_.size() + 4 * (key_scale_.size() + value_scale_.size());
}

uint32_t KvCache::Slot(uint32_t pos) const {
  return pos < sink_rows_ ? pos : sink_rows_ + (pos - sink_rows_) % ring_rows_;
}

bool KvCache::Holds(uint32_t l, uint32_t pos) const {
  const int64_t newest = newest_[size_t(l) * kv_heads_];
  if (int64_t(pos) > newest) return false;
  return pos < sink_rows_ || newest - int64_t(pos) < int64_t(ring_rows_);
}

void KvCache::Store(uint32_t l, uint32_t h, uint32_t pos, const float* key, const float* value) {
  const uint32_t slot = Slot(pos);
  const size_t r = RowIndex(l, h, slot);
  int8_t kq_small[512];
  std::vector<int8_t> kq_big(head_dim_ > 512 ? head_dim_ : 0);
  int8_t* kq = head_dim_ > 512 ? kq_big.data() : kq_small;
  QuantizeRow(key, head_dim_, kq, &key_scale_[r]);
  for (uint32_t c = 0; c < head_dim_; ++c) KeyAt(l, h, slot, c) = kq[c];
  QuantizeRow(value, head_dim_, &values_[r * head_dim_], &value_scale_[r]);
  int64_t& newest = newest_[size_t(l) * kv_heads_ + h];
  newest = std::max(newest, int64_t(pos));
}

void KvCache::AppendRows(ByteWriter& w) const {
  std::vector<int8_t> row(head_dim_);
  float scale = 0;
  for (uint32_t l = 0; l < layers_; ++l) {
    for (uint32_t h = 0; h < kv_heads_; ++h) {
      const uint32_t positions = uint32_t(newest_[size_t(l) * kv_heads_ + h] + 1);
      w.Put(positions);
      for (uint32_t pos = 0; pos < positions; ++pos) {
        if (!HeldAfter(positions, pos)) continue;
        KeyRow(l, h, pos, row.data(), &scale);
        w.PutArray(std::span<const int8_t>(row));
        w.Put(scale);
        ValueRow(l, h, pos, row.data(), &scale);
        w.PutArray(std::span<const int8_t>(row));
        w.Put(scale);
      }
    }
  }
}

absl::Status KvCache::ReadRows(ByteReader& r, uint32_t positions) {
  Reset();
  std::vector<int8_t> key(head_dim_), value(head_dim_);
  auto get_row = [&](const char* field, std::vector<int8_t>& q, float* scale) -> absl::Status {
    const uint64_t at = r.offset();
    if (absl::Status st = r.GetArray(field, std::span<int8_t>(q)); !st.ok()) return st;
    for (uint32_t c = 0; c < head_dim_; ++c) {
      if (q[c] == -128) return r.Bad(field, at + c, "int8 -128 (the cache stores -127..127)");
    }
    const uint64_t scale_at = r.offset();
    if (absl::Status st = r.Get("kv scale", scale); !st.ok()) return st;
    if (!std::isfinite(*scale) || *scale < 0)
      return r.Bad("kv scale", scale_at, "negative or not finite");
    return absl::OkStatus();
  };
  for (uint32_t l = 0; l < layers_; ++l) {
    for (uint32_t h = 0; h < kv_heads_; ++h) {
      const uint64_t at = r.offset();
      uint32_t stored = 0;
      if (absl::Status st = r.Get("kv positions", &stored); !st.ok()) return st;
      if (stored != positions)
        return r.Bad("kv positions", at,
                     "layer " + std::to_string(l) + " head " + std::to_string(h) + " holds " +
                         std::to_string(stored) + " positions, expected " +
                         std::to_string(positions));
      for (uint32_t pos = 0; pos < positions; ++pos) {
        if (!HeldAfter(positions, pos)) continue;
        float key_scale = 0, value_scale = 0;
        if (absl::Status st = get_row("kv key", key, &key_scale); !st.ok()) return st;
        if (absl::Status st = get_row("kv value", value, &value_scale); !st.ok()) return st;
        const uint32_t slot = Slot(pos);
        const size_t row = RowIndex(l, h, slot);
        for (uint32_t c = 0; c < head_dim_; ++c) KeyAt(l, h, slot, c) = key[c];
        key_scale_[row] = key_scale;
        std::copy(value.begin(), value.end(), &values_[row * head_dim_]);
        value_scale_[row] = value_scale;
      }
      newest_[size_t(l) * kv_heads_ + h] = int64_t(positions) - 1;
    }
  }
  return absl::OkStatus();
}

void KvCache::KeyRow(uint32_t l, uint32_t h, uint32_t pos, int8_t* out, float* scale) const {
  const uint32_t slot = Slot(pos);
  *scale = key_scale_[RowIndex(l, h, slot)];
  for (uint32_t c = 0; c < head_dim_; ++c) out[c] = KeyAt(l, h, slot, c);
}

void KvCache::ValueRow(uint32_t l, uint32_t h, uint32_t pos, int8_t* out, float* scale) const {
  const size_t r = RowIndex(l, h, Slot(pos));
  *scale = value_scale_[r];
  for (uint32_t c = 0; c < head_dim_; ++c) out[c] = values_[r * head_dim_ + c];
}

void KvCache::AttendBlock(uint32_t l, uint32_t h, uint32_t pos0, uint32_t tokens, const float* q,
                          size_t q_stride, uint32_t n_q, float* out, size_t out_stride,
                          float* scratch) const {
  // The union of the visible rows: the pinned prefix of the last query and the recent run
  // from the first query's window start to the last query. Union index u is position u
  // below `pinned`, else position lo + (u - pinned).
  const uint32_t last = pos0 + tokens - 1;
  auto window_lo = [&](uint32_t pos) {
    return attn_.window == 0 || pos + 1 < attn_.window ? 0 : pos + 1 - attn_.window;
  };
  const uint32_t pinned = std::min(attn_.sink, last + 1);
  const uint32_t lo = std::max(window_lo(pos0), pinned);
  const int64_t newest = newest_[size_t(l) * kv_heads_ + h];
  if (tokens == 0 || tokens > kernels::AttentionBlock::kMaxTokens || int64_t(last) > newest ||
      (lo <= last && newest - int64_t(lo) >= int64_t(ring_rows_))) {
    std::fprintf(stderr, "KvCache::AttendBlock: keys for queries %u..%u are not in the cache\n",
                 pos0, last);
    std::abort();
  }
  kernels::AttentionBlock b;
  if (pinned) b.runs.Add(0, pinned);
  if (lo <= last) {
    const uint32_t s0 = Slot(lo), n = last - lo + 1;
    const uint32_t first = std::min(n, sink_rows_ + ring_rows_ - s0);
    b.runs.Add(s0, first);
    if (n > first) b.runs.Add(sink_rows_, n - first);
  }
  b.tokens = tokens;
  for (uint32_t t = 0; t < tokens; ++t) {
    // Query pos sees positions [0, min(sink, pos + 1)) and [max(window_lo, that), pos].
    const uint32_t pos = pos0 + t, own_pinned = std::min(attn_.sink, pos + 1);
    const uint32_t own_lo = std::max(window_lo(pos), own_pinned);
    b.head[t] = own_pinned;
    b.from[t] = b.to[t] = pinned;
    if (own_lo <= pos) {  // then own_pinned == pinned and own_lo >= lo
      b.from[t] = pinned + (own_lo - lo);
      b.to[t] = pinned + (pos - lo) + 1;
    }
  }
  const size_t base = RowIndex(l, h, 0);
  kernels::AttendInt8Block(b, &keys_[KeyBlock(l, h)], rows(), &key_scale_[base],
                           &values_[base * head_dim_], &value_scale_[base], head_dim_, q, q_stride,
                           n_q, query_, out, out_stride, scratch);
}

void KvCache::Attend(uint32_t l, uint32_t h, uint32_t pos, const float* q, uint32_t n_q, float* out,
                     float* scratch) const {
  // Visible keys: the pinned prefix [0, min(sink, pos + 1)) and the recent run [lo, pos].
  const uint32_t sink_end = std::min(attn_.sink, pos + 1);
  uint32_t lo = attn_.window == 0 || pos + 1 < attn_.window ? 0 : pos + 1 - attn_.window;
  lo = std::max(lo, sink_end);
  const int64_t newest = newest_[size_t(l) * kv_heads_ + h];
  if (int64_t(pos) > newest || (lo <= pos && newest - int64_t(lo) >= int64_t(ring_rows_))) {
    std::fprintf(stderr, "KvCache::Attend: keys for query %u are not in the cache\n", pos);
    std::abort();
  }
  // The visible rows as up to three contiguous slot runs (pinned, ring tail, ring head).
  kernels::AttentionRuns runs;
  auto add = [&](uint32_t slot, uint32_t count) {
    if (count) runs.Add(slot, count);
  };
  add(0, sink_end);
  if (lo <= pos) {
    const uint32_t s0 = Slot(lo), n = pos - lo + 1;
    const uint32_t first = std::min(n, sink_rows_ + ring_rows_ - s0);
    add(s0, first);
    add(sink_rows_, n - first);
  }
  const size_t base = RowIndex(l, h, 0);
  kernels::AttendInt8(runs, &keys_[KeyBlock(l, h)], rows(), &key_scale_[base],
                      &values_[base * head_dim_], &value_scale_[base], head_dim_, q, n_q, query_,
                      out, scratch);
}

}  // namespace cact
