// The block-of-tokens attention (AttendInt8Block) over one ISA's pieces, shared by the
// SIMD files. Include inside the file's anonymous namespace (each file has its own flags,
// so nothing may be shared at link time), after it defines:
//   float SoftmaxInPlace(float* s, uint32_t n);                   returns 1 / sum
//   void Weights(const float* p, float inv, const float* vs, uint32_t n, float* w);
//   template <int Q> void BlockScores(runs, keys_t, row_stride, key_scale, hd, q, query, s);
//   template <int Q> void BlockValues(runs, values, hd, w, vis, out);
// (the contracts of the scalar code in fast_ops.cc, Q <= 8 queries at a time), having
// included <cstring>, <type_traits> and fast_ops_table.h itself.

// Calls f(std::integral_constant<int, Q>) for Q = n (1..8).
template <typename F>
inline void WithQueries(uint32_t n, F f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 2:
      return f(std::integral_constant<int, 2>());
    case 3:
      return f(std::integral_constant<int, 3>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 5:
      return f(std::integral_constant<int, 5>());
    case 6:
      return f(std::integral_constant<int, 6>());
    case 7:
      return f(std::integral_constant<int, 7>());
    default:
      return f(std::integral_constant<int, 8>());
  }
}

// Up to 8 queries (token x head) of a block at a time share each converted key and value
// row. Per query the operations are AttendInt8's: the same integer score, the same
// softmax over its own visible scores, and the same fma chain over its visible value rows
// in order (rows it does not see leave its sums untouched).
template <int Q>
void BlockGroup(const AttentionBlock& blk, const int8_t* keys_t, size_t row_stride,
                const float* key_scale, const int8_t* values, const float* value_scale, uint32_t hd,
                const float* const* q, ActPrecision query, const uint32_t* token, float* const* out,
                float* scratch) {
  const AttentionRuns& runs = blk.runs;
  const uint32_t total = runs.total();
  const size_t stride = total + 16;
  float* s[Q];
  float* w[Q];
  for (int i = 0; i < Q; ++i) {
    s[i] = scratch + i * stride;
    w[i] = scratch + (8 + i) * stride;
  }
  // The value scales by union index (in the last weight row, free when Q < 8, else read
  // before that row's weights are written).
  float* vs = scratch + 15 * stride;
  for (int k = 0, u = 0; k < runs.n; u += runs.count[k], ++k)
    std::memcpy(vs + u, value_scale + runs.start[k], runs.count[k] * sizeof(float));
  uint8_t* vis = reinterpret_cast<uint8_t*>(scratch + 16 * stride);
  BlockScores<Q>(runs, keys_t, row_stride, key_scale, hd, q, query, s);
  std::memset(vis, 0, total);
  for (int i = 0; i < Q; ++i) {
    const uint32_t t = token[i], head = blk.head[t], from = blk.from[t], to = blk.to[t];
    const uint32_t seen = head + (to - from);
    if (seen == 0) continue;  // no row: the output stays 0, as AttendV's
    float* si = s[i];
    if (from > head) std::memmove(si + head, si + from, (to - from) * sizeof(float));
    const float inv = SoftmaxInPlace(si, seen);
    Weights(si, inv, vs, head, w[i]);
    Weights(si + head, inv, vs + from, to - from, w[i] + from);
    const uint8_t bit = uint8_t(1u << i);
    for (uint32_t u = 0; u < head; ++u) vis[u] |= bit;
    for (uint32_t u = from; u < to; ++u) vis[u] |= bit;
  }
  BlockValues<Q>(runs, values, hd, w, vis, out);
}

void AttendBlockV(const AttentionBlock& blk, const int8_t* keys_t, size_t row_stride,
                  const float* key_scale, const int8_t* values, const float* value_scale,
                  uint32_t hd, const float* q, size_t q_stride, uint32_t n_q, ActPrecision query,
                  float* out, size_t out_stride, float* scratch) {
  const uint32_t queries = blk.tokens * n_q;
  for (uint32_t j0 = 0; j0 < queries; j0 += 8) {
    const uint32_t nq = queries - j0 < 8 ? queries - j0 : 8;
    const float* qs[8];
    float* os[8];
    uint32_t token[8];
    for (uint32_t i = 0; i < nq; ++i) {
      const uint32_t t = (j0 + i) / n_q, h = (j0 + i) % n_q;
      token[i] = t;
      qs[i] = q + t * q_stride + size_t(h) * hd;
      os[i] = out + t * out_stride + size_t(h) * hd;
    }
    WithQueries(nq, [&](auto qn) {
      BlockGroup<decltype(qn)::value>(blk, keys_t, row_stride, key_scale, values, value_scale, hd,
                                      qs, query, token, os, scratch);
    });
  }
}
