#include "formats/cact/finite_check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "formats/cact/cq_types.h"
#include "lib/float16.h"

namespace cact {
namespace {

// Bit tests, no float conversion: a value is non-finite when its exponent is all ones.
bool HalfNonFinite(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool FloatNonFinite(uint32_t f) { return (f & 0x7F800000u) == 0x7F800000u; }

std::string HalfName(uint16_t h) {
  if (h & 0x03FFu) return "NaN";
  return (h & 0x8000u) ? "-Inf" : "+Inf";
}
std::string FloatName(uint32_t f) {
  if (f & 0x007FFFFFu) return "NaN";
  return (f & 0x80000000u) ? "-Inf" : "+Inf";
}

class Finder {
 public:
  Finder(size_t limit, uint64_t* total) : limit_(limit), total_(total) {}

  void Halves(const uint8_t* p, uint64_t n, uint64_t file_offset, int64_t record,
              const std::string& tensor, bool group_norm) {
    // Four halves per 64-bit word: a lane is non-finite when its exponent bits are all set,
    // i.e. when (h & 0x7C00) ^ 0x7C00 is zero; words without such a lane are skipped.
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      uint64_t w;
      std::memcpy(&w, p + 2 * i, 8);
      const uint64_t t = (w & 0x7C007C007C007C00ull) ^ 0x7C007C007C007C00ull;
      if (((t - 0x0001000100010001ull) & ~t & 0x8000800080008000ull) == 0) continue;
      for (uint64_t k = i; k < i + 4; ++k) Half(p, k, file_offset, record, tensor, group_norm);
    }
    for (; i < n; ++i) Half(p, i, file_offset, record, tensor, group_norm);
  }
  void Half(const uint8_t* p, uint64_t i, uint64_t file_offset, int64_t record,
            const std::string& tensor, bool group_norm) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    if (HalfNonFinite(h)) Add({record, tensor, group_norm, i, file_offset + 2 * i, HalfName(h)});
  }
  void Floats(const uint8_t* p, uint64_t n, uint64_t file_offset, int64_t record,
              const std::string& tensor) {
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t f;
      std::memcpy(&f, p + 4 * i, 4);
      if (FloatNonFinite(f)) Add({record, tensor, false, i, file_offset + 4 * i, FloatName(f)});
    }
  }
  std::vector<NonFiniteValue> found;

 private:
  void Add(NonFiniteValue v) {
    ++count_;
    if (total_) *total_ = count_;
    if (found.size() < limit_) found.push_back(std::move(v));
  }
  size_t limit_;
  uint64_t* total_;
  uint64_t count_ = 0;
};

}  // namespace

std::string NonFiniteValue::Describe() const {
  const std::string what =
      record < 0 ? "codebook" : absl::StrFormat("tensor '%s' (record %d)", tensor, record);
  return absl::StrFormat("%s %s %d at byte %d is %s", what,
                         group_norm ? "norm of group" : "element", index, byte_offset, value);
}

std::vector<NonFiniteValue> FindNonFinite(const CactFile& file, size_t limit, uint64_t* total) {
  if (total) *total = 0;
  Finder f(limit, total);
  const std::span<const float> cb = file.codebook();  // stored right after the header
  f.Floats(reinterpret_cast<const uint8_t*>(cb.data()), cb.size(), kHeaderBytes, -1, "codebook");
  for (const TensorEntry& t : file.tensors()) {
    const std::span<const uint8_t> blob = file.blob(t);
    const uint64_t off = t.record.offset;
    switch (t.record.dtype) {
      case DType::kFP16:
        f.Halves(blob.data(), blob.size() / 2, off, t.index, t.name, false);
        break;
      case DType::kFP32:
        f.Floats(blob.data(), blob.size() / 4, off, t.index, t.name);
        break;
      case DType::kCQ: {
        // Codes first (every code is a codebook entry), then rows x groups FP16 norms.
        const CqType* type = FindCqType(t.record.bits);
        if (!type || t.record.group == 0) break;  // Open() has rejected these already
        const uint64_t code_bytes = t.rows() * type->RowBytes(t.cols(), t.record.group);
        if (code_bytes > blob.size()) break;
        f.Halves(blob.data() + code_bytes, (blob.size() - code_bytes) / 2, off + code_bytes,
                 t.index, t.name, true);
        break;
      }
      case DType::kRAW:
        break;
    }
  }
  return std::move(f.found);
}

absl::Status CheckFinite(const CactFile& file) {
  uint64_t total = 0;
  const std::vector<NonFiniteValue> bad = FindNonFinite(file, 1, &total);
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: %s (%d non-finite value%s; `cact-inspect verify` lists them): a non-finite model "
      "is refused",
      file.path(), bad[0].Describe(), total, total == 1 ? "" : "s"));
}

}  // namespace cact
