// The SHA-256 compression function with the x86 SHA extensions (SHA256RNDS2 does two rounds,
// SHA256MSG1/MSG2 the message schedule four words at a time). Compiled for those
// instructions with a target attribute, so the rest of the build keeps its baseline ISA;
// lib/sha256.cc calls it only when the CPU reports them.
#include "lib/cpu_features.h"
#include "lib/sha256_block.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cact::sha256_internal {

#if defined(__x86_64__) || defined(__i386__)

bool ShaNiUsable() { return GetCpuFeatures().sha_ni; }

__attribute__((target("sha,sse4.1,ssse3"))) void CompressShaNi(uint32_t state[8],
                                                               const uint8_t* blocks,
                                                               size_t count) {
  // SHA256RNDS2 keeps the working variables as two vectors, lanes listed high to low:
  // (A, B, E, F) and (C, D, G, H).
  __m128i abef = _mm_set_epi32(int(state[0]), int(state[1]), int(state[4]), int(state[5]));
  __m128i cdgh = _mm_set_epi32(int(state[2]), int(state[3]), int(state[6]), int(state[7]));
  // Message words are big-endian: reverse the bytes of each 32-bit lane; W[t] in the lowest.
  const __m128i byte_swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);

  for (; count; --count, blocks += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i m[4];  // W[4i .. 4i+3] for the next four groups of four rounds
    for (int i = 0; i < 4; ++i)
      m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)),
                              byte_swap);

#pragma GCC unroll 16
    for (int group = 0; group < 16; ++group) {
      __m128i wk = _mm_add_epi32(
          m[0], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * group)));
      // Two rounds return the new (A, B, E, F); the old one is the new (C, D, G, H).
      // Doing it twice with the roles swapped brings the names back after four rounds.
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
      if (group < 12) {
        // W[t..t+3] for t = 4 * group + 16: MSG1 adds sigma0(W[t-15..]) to W[t-16..], then the
        // W[t-7..] words are added and MSG2 adds sigma1 of W[t-2..] (its last two from the
        // words it is computing).
        __m128i next = _mm_sha256msg1_epu32(m[0], m[1]);
        next = _mm_add_epi32(next, _mm_alignr_epi8(m[3], m[2], 4));
        next = _mm_sha256msg2_epu32(next, m[3]);
        m[0] = m[1], m[1] = m[2], m[2] = m[3], m[3] = next;
      } else {
        m[0] = m[1], m[1] = m[2], m[2] = m[3];
      }
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }

  alignas(16) uint32_t lanes[2][4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes[0]), abef);
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes[1]), cdgh);
  state[0] = lanes[0][3], state[1] = lanes[0][2], state[4] = lanes[0][1], state[5] = lanes[0][0];
  state[2] = lanes[1][3], state[3] = lanes[1][2], state[6] = lanes[1][1], state[7] = lanes[1][0];
}

#else

bool ShaNiUsable() { return false; }
void CompressShaNi(uint32_t state[8], const uint8_t* blocks, size_t count) {
  CompressPortable(state, blocks, count);
}

#endif

}  // namespace cact::sha256_internal
