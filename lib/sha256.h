// SHA-256 (OpenSSL libcrypto) as lowercase hex.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace cact {
std::string Sha256Hex(std::span<const uint8_t> bytes);
}
