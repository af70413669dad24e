#include "lib/npy.h"

#include <cstring>


#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/float16.h"
#include "lib/status.h"

namespace cact {
namespace {

uint16_t HalfBits(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// Pulls the value of 'key': ... out of the header dict (numpy writes a Python literal).
std::string DictValue(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t c = h.find(':', k);
  if (c == std::string::npos) return {};
  size_t s = c + 1;
  while (s < h.size() && h[s] == ' ') ++s;
  if (s >= h.size()) return {};
  if (h[s] == '\'') {
    size_t e = h.find('\'', s + 1);
    return e == std::string::npos ? std::string() : h.substr(s + 1, e - s - 1);
  }
  if (h[s] == '(') {
    size_t e = h.find(')', s);
    return e == std::string::npos ? std::string() : h.substr(s, e - s + 1);
  }
  size_t e = h.find_first_of(",}", s);
  return h.substr(s, e == std::string::npos ? std::string::npos : e - s);
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(const std::string& name, const uint8_t* b, size_t n) {
  if (n < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0)
    return FormatError(name, "npy magic", 0, "not a .npy file");
  uint8_t major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = b[8] | (b[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) return FormatError(name, "npy header length", 8, "truncated");
    hlen = uint32_t(b[8]) | uint32_t(b[9]) << 8 | uint32_t(b[10]) << 16 | uint32_t(b[11]) << 24;
    hstart = 12;
  } else {
    return FormatError(name, "npy version", 6, absl::StrFormat("unsupported version %d", major));
  }
  if (hlen > n - hstart) return FormatError(name, "npy header", hstart, "header runs past the end");
  std::string h(reinterpret_cast<const char*>(b + hstart), hlen);
  NpyArray a;
  a.dtype = DictValue(h, "descr");
  if (DictValue(h, "fortran_order").find("True") != std::string::npos)
    return FormatError(name, "npy fortran_order", hstart, "Fortran order is not supported");
  std::string shp = DictValue(h, "shape");
  if (shp.empty() || shp[0] != '(') return FormatError(name, "npy shape", hstart, "missing shape");
  size_t count = 1;
  for (size_t i = 1; i < shp.size();) {
    while (i < shp.size() && (shp[i] == ' ' || shp[i] == ',')) ++i;
    if (i >= shp.size() || shp[i] == ')') break;
    size_t v = 0, digits = 0;
    while (i < shp.size() && shp[i] >= '0' && shp[i] <= '9') {
      v = v * 10 + size_t(shp[i] - '0');
      ++i, ++digits;
      if (v > (size_t{1} << 40))
        return FormatError(name, "npy shape", hstart, "dimension too large");
    }
    if (digits == 0) return FormatError(name, "npy shape", hstart, "malformed shape " + shp);
    a.shape.push_back(v);
    if (v && count > (size_t{1} << 40) / v)
      return FormatError(name, "npy shape", hstart, "too many elements");
    count *= v;
  }
  size_t item;
  const std::string& d = a.dtype;
  if (d == "<f4" || d == "<i4" || d == "<u4")
    item = 4;
  else if (d == "<f8" || d == "<i8" || d == "<u8")
    item = 8;
  else if (d == "<f2" || d == "<i2" || d == "<u2")
    item = 2;
  else if (d == "|u1" || d == "|i1" || d == "|b1")
    item = 1;
  else
    return FormatError(name, "npy descr", hstart, "unsupported dtype " + d);
  size_t off = hstart + hlen;
  if (count > (n - off) / item)
    return FormatError(name, "npy data", off, "data shorter than shape says");
  a.data.resize(count);
  const uint8_t* p = b + off;
  for (size_t i = 0; i < count; ++i, p += item) {
    float f;
    if (d == "<f4")
      std::memcpy(&f, p, 4);
    else if (d == "<f8") {
      double x;
      std::memcpy(&x, p, 8);
      f = float(x);
    } else if (d == "<f2")
      f = HalfBitsToFloat(HalfBits(p));
    else if (d == "<i4") {
      int32_t x;
      std::memcpy(&x, p, 4);
      f = float(x);
    } else if (d == "<u4") {
      uint32_t x;
      std::memcpy(&x, p, 4);
      f = float(x);
    } else if (d == "<i8") {
      int64_t x;
      std::memcpy(&x, p, 8);
      f = float(x);
    } else if (d == "<u8") {
      uint64_t x;
      std::memcpy(&x, p, 8);
      f = float(x);
    } else if (d == "<i2") {
      int16_t x;
      std::memcpy(&x, p, 2);
      f = float(x);
    } else if (d == "<u2") {
      uint16_t x;
      std::memcpy(&x, p, 2);
      f = float(x);
    } else if (d == "|i1")
      f = float(int8_t(*p));
    else
      f = float(*p);
    a.data[i] = f;
  }
  return a;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes fb, FileBytes::Open(path));
  return ParseNpy(path, fb.data(), fb.size());
}

std::vector<uint8_t> SerializeNpyF32(const float* data, const std::vector<size_t>& shape) {
  std::string shp = "(";
  size_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shp += std::to_string(shape[i]);
    shp += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shp += " ";
    count *= shape[i];
  }
  shp += ")";
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shp + ", }";
  size_t total = 10 + h.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  h.append(pad, ' ');
  h.push_back('\n');
  std::vector<uint8_t> out(10 + h.size() + count * 4);
  std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
  out[8] = uint8_t(h.size() & 0xFF);
  out[9] = uint8_t(h.size() >> 8);
  std::memcpy(out.data() + 10, h.data(), h.size());
  if (count) std::memcpy(out.data() + 10 + h.size(), data, count * 4);
  return out;
}

absl::Status WriteNpy(const std::string& path, const float* data,
                      const std::vector<size_t>& shape) {
  return WriteFileAtomic(path, SerializeNpyF32(data, shape));
}

}  // namespace cact
