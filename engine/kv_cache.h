// The fast path's int8 KV cache: per layer and KV head, keys (after RoPE) and values are
// stored as int8 with one absmax/127 scale per vector (one position, one KV head).
// Positions below `sink` are pinned and never leave; the others live in a ring of
// `window + slack` rows, so memory is bounded by window + sink (+ `slack`, the keys
// stored ahead of their queries), whatever the sequence length. With window 0 (plain
// causal) the ring holds max_seq_len rows.
//
// Visibility is the reference rule: key k is visible from query q iff k <= q and
// (window == 0 or q - k < window or k < sink). The cache checks that every visible key
// is still present (a caller feeding more than `slack` + 1 tokens at once without
// attending would violate it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/forward.h"
#include "engine/kernels/cq_kernels.h"  // ActPrecision
#include "engine/kernels/fast_ops.h"    // KeyOffset
#include "lib/byte_io.h"

namespace cact {

class KvCache {
 public:
  // slack: the most keys written ahead of the query that attends (the fast path's
  // attention block minus one); the ring keeps window + slack rows. query: the int8 levels
  // the queries are quantized to for the scores (kernels::AttendInt8).
  KvCache(uint32_t layers, uint32_t kv_heads, uint32_t head_dim, AttentionWindow attn,
          uint32_t max_seq_len, uint32_t slack,
          kernels::ActPrecision query = kernels::ActPrecision::kInt8);

  void Reset();
  uint32_t layers() const { return layers_; }
  uint32_t kv_heads() const { return kv_heads_; }
  uint32_t head_dim() const { return head_dim_; }
  const AttentionWindow& attn() const { return attn_; }
  // Rows held per layer (pinned + ring).
  uint32_t rows() const { return sink_rows_ + ring_rows_; }
  // Bytes of the cache storage (int8 rows and their scales).
  size_t bytes() const;

  // Quantizes and stores the key and value of position `pos`, KV head `h`, layer `l`
  // (head_dim floats each). Positions must be stored in increasing order per (l, h).
  void Store(uint32_t l, uint32_t h, uint32_t pos, const float* key, const float* value);

  // Attention of `n_q` query heads (n_q * head_dim floats, already normalised and
  // rotated) that all read KV head `h` of layer `l`, at query position `pos`:
  // out[i] = sum_k softmax_k(q_i . key_k / sqrt(head_dim)) value_k over visible keys k,
  // with the query quantized to `query`'s levels (kernels::AttendInt8).
  // `scratch` must hold at least rows() floats per query head.
  void Attend(uint32_t l, uint32_t h, uint32_t pos, const float* q, uint32_t n_q, float* out,
              float* scratch) const;

  // Attend for the `tokens` (<= kernels::AttentionBlock::kMaxTokens) consecutive query
  // positions pos0.. at once: query t's n_q heads at q + t * q_stride, its output at
  // out + t * out_stride; the same bits as Attend per position. All their keys must be
  // stored first (the ring needs slack >= tokens - 1). `scratch`: AttendBlockScratch(rows(),
  // n_q) floats.
  void AttendBlock(uint32_t l, uint32_t h, uint32_t pos0, uint32_t tokens, const float* q,
                   size_t q_stride, uint32_t n_q, float* out, size_t out_stride,
                   float* scratch) const;

  // Stored int8 key / value of position `pos` (head_dim values) and its scale (tests).
  void KeyRow(uint32_t l, uint32_t h, uint32_t pos, int8_t* out, float* scale) const;
  void ValueRow(uint32_t l, uint32_t h, uint32_t pos, int8_t* out, float* scale) const;
  // Whether position `pos` is currently held.
  bool Holds(uint32_t l, uint32_t pos) const;

  // The held rows as bytes, per (layer, KV head): u32 positions stored, then for each held
  // position in order its int8 key, key scale, int8 value and value scale. AppendRows
  // writes them; ReadRows resets the cache and stores them back exactly, refusing another
  // count than `positions`, a scale that is negative or not finite, or an int8 -128
  // (the quantizer clamps to [-127, 127]).
  void AppendRows(ByteWriter& w) const;
  absl::Status ReadRows(ByteReader& r, uint32_t positions);

 private:
  uint32_t Slot(uint32_t pos) const;
  // Whether `pos` is held once `positions` positions have been stored.
  bool HeldAfter(uint32_t positions, uint32_t pos) const {
    return pos < positions && (pos < sink_rows_ || positions - 1 - pos < ring_rows_);
  }
  // Row index of (layer, head, slot) in the scale arrays and value rows.
  size_t RowIndex(uint32_t l, uint32_t h, uint32_t slot) const {
    return (size_t(l) * kv_heads_ + h) * rows() + slot;
  }
  // Start of the key block of (layer, head): element (c, slot) at
  // [kernels::KeyOffset(c, slot, rows())].
  size_t KeyBlock(uint32_t l, uint32_t h) const {
    return (size_t(l) * kv_heads_ + h) * kernels::KeyBytes(head_dim_, rows());
  }
  int8_t& KeyAt(uint32_t l, uint32_t h, uint32_t slot, uint32_t c) {
    return keys_[KeyBlock(l, h) + kernels::KeyOffset(c, slot, rows())];
  }
  int8_t KeyAt(uint32_t l, uint32_t h, uint32_t slot, uint32_t c) const {
    return keys_[KeyBlock(l, h) + kernels::KeyOffset(c, slot, rows())];
  }

  uint32_t layers_, kv_heads_, head_dim_;
  AttentionWindow attn_;
  kernels::ActPrecision query_;
  uint32_t sink_rows_ = 0, ring_rows_ = 0;
  std::vector<int8_t> keys_;    // [layer][kv_head] key blocks (kernels::KeyOffset)
  std::vector<int8_t> values_;  // [layer][kv_head][row][head_dim]
  std::vector<float> key_scale_, value_scale_;  // [layer][kv_head][row]
  std::vector<int64_t> newest_;                 // per layer: newest stored position, -1 none
};

}  // namespace cact
