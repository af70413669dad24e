// SHA-256 (FIPS 180-4) as lowercase hex, implemented here (no libcrypto: loading and
// relocating it cost every process ~1.4 MiB of resident memory). Portable C++ plus an x86
// SHA-NI path chosen at run time when the CPU has the SHA extensions.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace cact {

std::string Sha256Hex(std::span<const uint8_t> bytes);

// The compression function behind a digest. kAuto is what Sha256Hex uses; the others exist
// so tests can check the two paths against each other and against an outside oracle.
enum class Sha256Impl { kAuto, kPortable, kShaNi };
bool Sha256ShaNiAvailable();
// kShaNi on a CPU without SHA-NI falls back to the portable path.
std::array<uint8_t, 32> Sha256Digest(std::span<const uint8_t> bytes,
                                     Sha256Impl impl = Sha256Impl::kAuto);

}  // namespace cact
