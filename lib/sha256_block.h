// The two SHA-256 compression functions behind lib/sha256.h (internal to lib/).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cact::sha256_internal {

// Round constants K0..K63 (FIPS 180-4 section 4.2.2).
extern const uint32_t kRoundConstants[64];

// Each folds `count` consecutive 64-byte blocks into state (H0..H7).
void CompressPortable(uint32_t state[8], const uint8_t* blocks, size_t count);
// x86 SHA-NI + SSE4.1; only call when ShaNiUsable().
void CompressShaNi(uint32_t state[8], const uint8_t* blocks, size_t count);
bool ShaNiUsable();

}  // namespace cact::sha256_internal
