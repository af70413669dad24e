// SHA-256 from FIPS 180-4: padding (5.1.1), initial hash value (5.3.3), output big-endian.
// The compression function lives in sha256_portable.cc / sha256_shani.cc.
#include "lib/sha256.h"

#include <cstring>

#include "lib/sha256_block.h"

namespace cact {
namespace {

using sha256_internal::CompressPortable;
using sha256_internal::CompressShaNi;

constexpr uint32_t kInitialHash[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

using CompressFn = void (*)(uint32_t*, const uint8_t*, size_t);

CompressFn Pick(Sha256Impl impl) {
  if (impl == Sha256Impl::kPortable || !sha256_internal::ShaNiUsable()) return CompressPortable;
  return CompressShaNi;
}

}  // namespace

bool Sha256ShaNiAvailable() { return sha256_internal::ShaNiUsable(); }

std::array<uint8_t, 32> Sha256Digest(std::span<const uint8_t> bytes, Sha256Impl impl) {
  const CompressFn compress = Pick(impl);
  uint32_t state[8];
  std::memcpy(state, kInitialHash, sizeof state);

  const size_t full_blocks = bytes.size() / 64;
  if (full_blocks) compress(state, bytes.data(), full_blocks);

  // The rest, then a 1 bit, zeros, and the message length in bits as a 64-bit big-endian
  // integer ending the last block: one block if the rest leaves room for 9 bytes, else two.
  const size_t rest = bytes.size() % 64;
  uint8_t tail[128] = {};
  if (rest) std::memcpy(tail, bytes.data() + 64 * full_blocks, rest);
  tail[rest] = 0x80;
  const size_t tail_blocks = rest + 9 <= 64 ? 1 : 2;
  const uint64_t bit_length = uint64_t(bytes.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[64 * tail_blocks - 1 - i] = uint8_t(bit_length >> (8 * i));
  compress(state, tail, tail_blocks);

  std::array<uint8_t, 32> digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = uint8_t(state[i] >> (24 - 8 * j));
  return digest;
}

std::string Sha256Hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : Sha256Digest(bytes)) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace cact
