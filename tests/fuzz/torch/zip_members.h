// A minimal zip reader/writer for the TorchScript fuzzer: split an archive into its members
// (found through the central directory, deflated ones inflated) and write members back as a
// stored archive with correct CRC-32s, so a mutation can land inside one member's content
// (the pickle, the TorchScript code, a carried buffer) and still reach libtorch's unpickler.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cact::fuzz {

struct ZipMember {
  std::string name;
  std::vector<uint8_t> data;  // uncompressed content
};

namespace zip_detail {
inline uint32_t U16(const uint8_t* p) { return p[0] | (p[1] << 8); }
inline uint32_t U32(const uint8_t* p) { return U16(p) | (U16(p + 2) << 16); }
inline void Put16(std::vector<uint8_t>& o, uint32_t v) {
  o.push_back(v & 0xFF), o.push_back((v >> 8) & 0xFF);
}
inline void Put32(std::vector<uint8_t>& o, uint32_t v) { Put16(o, v & 0xFFFF), Put16(o, v >> 16); }

inline std::optional<std::vector<uint8_t>> Inflate(const uint8_t* src, size_t n, size_t out_size) {
  if (out_size > (64u << 20)) return std::nullopt;
  std::vector<uint8_t> out(out_size);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return std::nullopt;
  z.next_in = const_cast<uint8_t*>(src);
  z.avail_in = uInt(n);
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const bool ok = rc == Z_STREAM_END && z.total_out == out_size;
  inflateEnd(&z);
  if (!ok) return std::nullopt;
  return out;
}
}  // namespace zip_detail

// nullopt unless every central directory entry points at a readable member.
inline std::optional<std::vector<ZipMember>> ReadZip(const uint8_t* z, size_t size) {
  using namespace zip_detail;
  if (size < 22) return std::nullopt;
  size_t eocd = size - 22;
  while (eocd > 0 && U32(z + eocd) != 0x06054b50 && size - eocd < 22 + 65535) --eocd;
  if (U32(z + eocd) != 0x06054b50) return std::nullopt;
  const size_t entries = U16(z + eocd + 10);
  size_t p = U32(z + eocd + 16);
  std::vector<ZipMember> out;
  for (size_t i = 0; i < entries; ++i) {
    if (p + 46 > size || U32(z + p) != 0x02014b50) return std::nullopt;
    const uint32_t method = U16(z + p + 10);
    const size_t csize = U32(z + p + 20), usize = U32(z + p + 24);
    const size_t n = U16(z + p + 28), extra = U16(z + p + 30), comment = U16(z + p + 32);
    const size_t local = U32(z + p + 42);
    if (p + 46 + n > size || local + 30 > size) return std::nullopt;
    ZipMember m;
    m.name.assign(reinterpret_cast<const char*>(z + p + 46), n);
    const size_t data = local + 30 + U16(z + local + 26) + U16(z + local + 28);
    if (data > size || csize > size - data) return std::nullopt;
    if (method == 0) {
      m.data.assign(z + data, z + data + csize);
    } else if (method == 8) {
      auto inflated = Inflate(z + data, csize, usize);
      if (!inflated) return std::nullopt;
      m.data = std::move(*inflated);
    } else {
      return std::nullopt;
    }
    out.push_back(std::move(m));
    p += 46 + n + extra + comment;
  }
  return out;
}

// Stored members, local headers with sizes and CRC-32 (no data descriptors), then the
// central directory. Member data is 64-byte aligned like torch's writer does.
inline std::vector<uint8_t> WriteZip(const std::vector<ZipMember>& members) {
  using namespace zip_detail;
  std::vector<uint8_t> o, dir;
  for (const ZipMember& m : members) {
    const uint32_t crc = uint32_t(crc32(0, m.data.data(), uInt(m.data.size())));
    const size_t local = o.size();
    const size_t pad = (64 - (local + 30 + m.name.size() + 4) % 64) % 64;  // extra = id, len, pad
    Put32(o, 0x04034b50), Put16(o, 20), Put16(o, 0), Put16(o, 0), Put16(o, 0), Put16(o, 0);
    Put32(o, crc), Put32(o, uint32_t(m.data.size())), Put32(o, uint32_t(m.data.size()));
    Put16(o, uint32_t(m.name.size())), Put16(o, uint32_t(4 + pad));
    o.insert(o.end(), m.name.begin(), m.name.end());
    Put16(o, 0xCAFE), Put16(o, uint32_t(pad));
    o.insert(o.end(), pad, 'Z');
    o.insert(o.end(), m.data.begin(), m.data.end());
    Put32(dir, 0x02014b50), Put16(dir, 20), Put16(dir, 20), Put16(dir, 0), Put16(dir, 0),
        Put16(dir, 0);
    Put16(dir, 0), Put32(dir, crc), Put32(dir, uint32_t(m.data.size())),
        Put32(dir, uint32_t(m.data.size()));
    Put16(dir, uint32_t(m.name.size())), Put16(dir, 0), Put16(dir, 0), Put16(dir, 0), Put16(dir, 0);
    Put32(dir, 0), Put32(dir, uint32_t(local));
    dir.insert(dir.end(), m.name.begin(), m.name.end());
  }
  const size_t dir_at = o.size();
  o.insert(o.end(), dir.begin(), dir.end());
  Put32(o, 0x06054b50), Put16(o, 0), Put16(o, 0), Put16(o, uint32_t(members.size())),
      Put16(o, uint32_t(members.size())), Put32(o, uint32_t(dir.size())),
      Put32(o, uint32_t(dir_at)), Put16(o, 0);
  return o;
}

}  // namespace cact::fuzz
