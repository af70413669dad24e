#include "libtorch/archive_check.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/status.h"

namespace cact::torchscript {
namespace {

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

constexpr uint32_t kEocd = 0x06054b50, kCentral = 0x02014b50, kLocal = 0x04034b50;

// Bytes of argument after each pickle opcode: >= 0 fixed; kLength1/4/8 a little-endian length
// prefix of that many bytes then the data; kLine / kTwoLines newline-terminated text;
// kUnknown not a pickle opcode (protocols 0-5).
enum : int {
  kUnknown = -1,
  kLength1 = -2,
  kLength4 = -3,
  kLength8 = -4,
  kLine = -5,
  kTwoLines = -6
};

constexpr std::array<int, 256> PickleArgs() {
  std::array<int, 256> a{};
  for (int& v : a) v = kUnknown;
  for (unsigned char op : std::string_view(
           "(.012NRabde}]lostu)Q\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98"))
    a[op] = 0;
  a[0x80] = 1, a[0x95] = 8;                        // PROTO, FRAME
  a['J'] = 4, a['K'] = 1, a['M'] = 2, a['G'] = 8;  // BININT*, BINFLOAT
  a['h'] = 1, a['j'] = 4, a['q'] = 1, a['r'] = 4;  // BINGET, LONG_BINGET, BINPUT, LONG_BINPUT
  a[0x82] = 1, a[0x83] = 2, a[0x84] = 4;           // EXT1/2/4
  a['U'] = kLength1, a['T'] = kLength4,
  a[0x8c] = kLength1;                     // SHORT_BINSTRING, BINSTRING, SHORT_BINUNICODE
  a['X'] = kLength4, a[0x8d] = kLength8;  // BINUNICODE, BINUNICODE8
  a['C'] = kLength1, a['B'] = kLength4, a[0x8e] = kLength8;  // SHORT_BINBYTES, BINBYTES, BINBYTES8
  a[0x96] = kLength8, a[0x8a] = kLength1, a[0x8b] = kLength4;  // BYTEARRAY8, LONG1, LONG4
  for (unsigned char op : std::string_view("ILFSVPgp")) a[op] = kLine;
  a['c'] = kTwoLines, a['i'] = kTwoLines;  // GLOBAL, INST
  return a;
}
constexpr std::array<int, 256> kPickleArgs = PickleArgs();

}  // namespace

uint32_t Crc32(std::span<const uint8_t> bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

absl::Status CheckPickle(std::span<const uint8_t> p, const std::string& path,
                         const std::string& member) {
  const std::string field = "pickle " + member;
  uint64_t memo_entries = 0;  // a pickler numbers its memo entries 0, 1, 2, ...
  size_t i = 0;
  while (i < p.size()) {
    const size_t at = i;
    const uint8_t op = p[i++];
    const int args = kPickleArgs[op];
    const size_t left = p.size() - i;
    auto error = [&](const std::string& what) { return FormatError(path, field, at, what); };
    if (args == kUnknown) return error(absl::StrCat("unknown opcode 0x", absl::Hex(op)));
    if (op == '.') return absl::OkStatus();  // STOP
    if (args >= 0) {
      if (size_t(args) > left) return error("opcode argument runs past the end");
      const uint64_t v = Le(p.data() + i, args);
      if ((op == 'q' || op == 'r') && v > memo_entries) {
        return error(absl::StrCat("memo id ", v, " skips ahead of the ", memo_entries,
                                  " entries made so far"));
      }
      if ((op == 'h' || op == 'j') && v >= memo_entries) {
        return error(absl::StrCat("memo id ", v, " read before it was made"));
      }
      if ((op == 'q' || op == 'r') && v == memo_entries) ++memo_entries;
      if (op == 0x95 && v > left - 8) return error("frame runs past the end");
      i += size_t(args);
    } else if (args == kLength1 || args == kLength4 || args == kLength8) {
      const int n = args == kLength1 ? 1 : args == kLength4 ? 4 : 8;
      if (size_t(n) > left) return error("length runs past the end");
      const uint64_t len = Le(p.data() + i, n);
      if (len > left - n)
        return error(
            absl::StrCat("length ", len, " runs past the end (", left - n, " bytes left)"));
      i += n + size_t(len);
    } else {
      for (int line = 0; line < (args == kTwoLines ? 2 : 1); ++line) {
        const void* nl = std::memchr(p.data() + i, '\n', p.size() - i);
        if (!nl) return error("text argument without a newline");
        i = size_t(static_cast<const uint8_t*>(nl) - p.data()) + 1;
      }
      if (op == 'p') ++memo_entries;  // PUT with a text id: counted, its id not checked
    }
    if (op == 0x94) ++memo_entries;  // MEMOIZE
  }
  return FormatError(path, field, p.size(), "no STOP opcode");
}

absl::Status CheckTorchScriptSource(std::string_view code, const std::string& path,
                                    const std::string& member) {
  // What the TorchScript printer writes untyped in a class body (handled by the importer).
  static constexpr std::string_view kUntyped[] = {"__parameters__", "__buffers__",
                                                  "__annotations__", "__forward_pre_hooks__",
                                                  "__forward_hooks__"};
  bool in_class = false;
  for (size_t at = 0; at < code.size();) {
    const size_t end = std::min(code.find('\n', at), code.size());
    const std::string_view line = code.substr(at, end - at);
    if (!line.empty() && line[0] != ' ' && line[0] != '#') in_class = line.substr(0, 6) == "class ";
    // A class-level statement: two spaces of indent, then an identifier and '=' with no ':'.
    if (in_class && line.size() > 2 && line.substr(0, 2) == "  " && line[2] != ' ') {
      const std::string_view body = line.substr(2);
      size_t n = 0;
      while (n < body.size() &&
             (std::isalnum(static_cast<unsigned char>(body[n])) || body[n] == '_'))
        ++n;
      size_t eq = n;
      while (eq < body.size() && body[eq] == ' ') ++eq;
      const std::string_view name = body.substr(0, n);
      if (n > 0 && eq < body.size() && body[eq] == '=' &&
          (eq + 1 == body.size() || body[eq + 1] != '=') &&
          std::find(std::begin(kUntyped), std::end(kUntyped), name) == std::end(kUntyped)) {
        return FormatError(path, "TorchScript code " + member, at,
                           "class attribute '" + std::string(name) + "' assigned without a type");
      }
    }
    at = end + 1;
  }
  return absl::OkStatus();
}

absl::Status CheckTorchArchive(std::span<const uint8_t> z, const std::string& path) {
  const size_t size = z.size();
  if (size < 22)
    return FormatError(path, "zip end of central directory", 0, "file too short for a zip archive");
  // The end record is the last 22 bytes plus a comment of at most 65535 bytes.
  size_t eocd = size - 22;
  while (Le(&z[eocd], 4) != kEocd && eocd > 0 && size - eocd < 22 + 65535) --eocd;
  if (Le(&z[eocd], 4) != kEocd)
    return FormatError(path, "zip end of central directory", size, "not found");
  const uint64_t entries = Le(&z[eocd + 10], 2), dir_size = Le(&z[eocd + 12], 4),
                 dir_at = Le(&z[eocd + 16], 4);
  if (entries == 0xFFFF || dir_size == 0xFFFFFFFF || dir_at == 0xFFFFFFFF)
    return absl::OkStatus();  // ZIP64
  if (dir_at > eocd || dir_size > eocd - dir_at) {
    return FormatError(path, "zip central directory", eocd + 16, "lies outside the file");
  }
  size_t p = dir_at;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > dir_at + dir_size || Le(&z[p], 4) != kCentral) {
      return FormatError(path, "zip central directory", p,
                         absl::StrCat("entry ", e, " of ", entries, " missing"));
    }
    const uint64_t method = Le(&z[p + 10], 2), crc = Le(&z[p + 16], 4);
    const uint64_t csize = Le(&z[p + 20], 4), usize = Le(&z[p + 24], 4), local = Le(&z[p + 42], 4);
    const size_t name_len = Le(&z[p + 28], 2),
                 entry_len = 46 + name_len + Le(&z[p + 30], 2) + Le(&z[p + 32], 2);
    if (entry_len > dir_at + dir_size - p)
      return FormatError(path, "zip central directory", p, "entry runs past the directory");
    const std::string name(reinterpret_cast<const char*>(&z[p + 46]), name_len);
    if (csize == 0xFFFFFFFF || usize == 0xFFFFFFFF || local == 0xFFFFFFFF)
      return absl::OkStatus();  // ZIP64
    const std::string field = "zip member " + name;
    if (local + 30 > size || Le(&z[local], 4) != kLocal)
      return FormatError(path, field, local, "no local header");
    const uint64_t data = local + 30 + Le(&z[local + 26], 2) + Le(&z[local + 28], 2);
    if (data > size || csize > size - data)
      return FormatError(path, field, data, "data runs past the end of the file");
    const std::span<const uint8_t> bytes = z.subspan(data, csize);
    if (method == 0) {
      if (usize != csize) return FormatError(path, field, p + 20, "stored member with two sizes");
      if (Crc32(bytes) != crc)
        return FormatError(path, field, data, "CRC-32 mismatch (damaged file)");
      if (absl::EndsWith(name, "pkl")) CACT_RETURN_IF_ERROR(CheckPickle(bytes, path, name));
    } else if (method == 8) {
      // Deflate expands at most 1032:1; torch deflates only code and debug records.
      if (usize > csize * 1032 + 1024 || usize > (uint64_t{256} << 20)) {
        return FormatError(path, field, p + 24, "implausible uncompressed size");
      }
    } else {
      return FormatError(path, field, p + 10,
                         absl::StrCat("compression method ", method, " (libtorch reads 0 and 8)"));
    }
    p += entry_len;
  }
  return absl::OkStatus();
}

}  // namespace cact::torchscript
