// Little-endian loads and stores on unaligned bytes (all .cact / safetensors integers are LE).
#pragma once
#include <cstdint>
#include <cstring>

namespace cact {

inline uint16_t LoadLE16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t LoadLE32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline uint64_t LoadLE64(const uint8_t* p) {
  return uint64_t(LoadLE32(p)) | (uint64_t(LoadLE32(p + 4)) << 32);
}
inline float LoadLEF32(const uint8_t* p) {
  uint32_t u = LoadLE32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline void StoreLE16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline void StoreLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void StoreLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void StoreLEF32(uint8_t* p, float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  StoreLE32(p, u);
}

}  // namespace cact
