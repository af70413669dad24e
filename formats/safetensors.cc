#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/le_bytes.h"
#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/float16.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"

namespace cact {

namespace {

size_t DTypeSize(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

struct Entry {
  FloatTensor tensor;
  uint64_t begin = 0, end = 0;
};

void DecodeData(const uint8_t* p, uint64_t count, const std::string& dtype,
                std::vector<float>* out) {
  out->resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (dtype == "F32")
      (*out)[i] = LoadLEF32(p + 4 * i);
    else if (dtype == "F16")
      (*out)[i] = HalfBitsToFloat(LoadLE16(p + 2 * i));
    else
      (*out)[i] = Bf16BitsToFloat(LoadLE16(p + 2 * i));
  }
}

absl::StatusOr<Entry> ParseEntry(const std::string& key, const nlohmann::json& v,
                                 const std::string& name, uint64_t data_start, uint64_t data_size) {
  const std::string field = "tensor '" + key + "'";
  if (!v.is_object()) return FormatError(name, field, 8, "entry is not a JSON object");
  Entry e;
  e.tensor.name = key;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string())
    return FormatError(name, field + " dtype", 8, "missing or not a string");
  e.tensor.stored_dtype = dt->get<std::string>();
  const size_t elem = DTypeSize(e.tensor.stored_dtype);
  if (!elem)
    return FormatError(
        name, field + " dtype", 8,
        absl::StrFormat("'%s' is not supported (F32, F16, BF16)", e.tensor.stored_dtype));
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array())
    return FormatError(name, field + " shape", 8, "missing or not an array");
  uint64_t count = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > UINT32_MAX)
      return FormatError(name, field + " shape", 8, "dimension is not an integer in [0, 2^32)");
    e.tensor.shape.push_back(d.get<uint32_t>());
    if (__builtin_mul_overflow(count, d.get<uint64_t>(), &count))
      return FormatError(name, field + " shape", 8, "element count overflows 64 bits");
  }
  auto offs = v.find("data_offsets");
  if (offs == v.end() || !offs->is_array() || offs->size() != 2 ||
      !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned())
    return FormatError(name, field + " data_offsets", 8, "missing or not two unsigned integers");
  e.begin = (*offs)[0].get<uint64_t>();
  e.end = (*offs)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    return FormatError(
        name, field + " data_offsets", data_start + std::min(e.begin, data_size),
        absl::StrFormat("[%d, %d) is not inside the %d data bytes", e.begin, e.end, data_size));
  uint64_t need = 0;
  if (__builtin_mul_overflow(count, uint64_t(elem), &need) || need != e.end - e.begin)
    return FormatError(name, field + " data_offsets", data_start + e.begin,
                       absl::StrFormat("%d bytes but %s x %d elements needs %d", e.end - e.begin,
                                       e.tensor.stored_dtype, count, need));
  return e;
}

}  // namespace

const FloatTensor* Safetensors::Find(const std::string& name) const {
  for (const FloatTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

absl::StatusOr<Safetensors> ParseSafetensors(std::span<const uint8_t> bytes,
                                             const std::string& name) {
  if (bytes.size() < 8)
    return FormatError(
        name, "header length", 0,
        absl::StrFormat("file has %d bytes, the length prefix needs 8", bytes.size()));
  // A .cact model is the usual wrong file: say so instead of quoting its tag as a length.
  if (LoadLE32(bytes.data()) == kCactTag)
    return FileError(name, "is a .cact model (it starts with the .cact tag), not a safetensors "
                           "file");
  const uint64_t n = LoadLE64(bytes.data());
  // Bound the header before touching (or allocating for) it: first by the file itself, which
  // tells a file of another kind (whose first bytes are no length) from a safetensors file,
  // then by the limit.
  if (n > bytes.size() - 8)
    return FormatError(name, "header length", 0,
                       absl::StrFormat("%d bytes but only %d follow the prefix (file size %d): "
                                       "not a safetensors file, or a truncated one",
                                       n, bytes.size() - 8, bytes.size()));
  if (n > kMaxSafetensorsHeader)
    return FormatError(
        name, "header length", 0,
        absl::StrFormat("%d bytes is more than the %d byte limit", n, kMaxSafetensorsHeader));
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  nlohmann::json j = nlohmann::json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return FormatError(name, "header JSON", 8, "not a valid JSON object");
  const uint64_t data_start = 8 + n, data_size = bytes.size() - data_start;
  Safetensors st;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return FormatError(name, "__metadata__", 8, "not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return FormatError(name, "__metadata__." + m.key(), 8, "value is not a string");
        st.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    CACT_ASSIGN_OR_RETURN(Entry e, ParseEntry(it.key(), *it, name, data_start, data_size));
    entries.push_back(std::move(e));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < entries.size(); ++k) {
    const Entry &prev = entries[k - 1], &cur = entries[k];
    if (cur.begin < prev.end)
      return FormatError(name, "tensor '" + cur.tensor.name + "' data_offsets",
                         data_start + cur.begin,
                         absl::StrFormat("[%d, %d) overlaps '%s' [%d, %d)", cur.begin, cur.end,
                                         prev.tensor.name, prev.begin, prev.end));
  }
  for (Entry& e : entries) {
    const uint64_t count = (e.end - e.begin) / DTypeSize(e.tensor.stored_dtype);
    DecodeData(bytes.data() + data_start + e.begin, count, e.tensor.stored_dtype, &e.tensor.data);
    st.tensors.push_back(std::move(e.tensor));
  }
  return st;
}

absl::StatusOr<Safetensors> ReadSafetensors(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  return ParseSafetensors(bytes.span(), path);
}

std::vector<uint8_t> SerializeSafetensors(const Safetensors& s, const std::string& dtype) {
  const size_t elem = DTypeSize(dtype) ? DTypeSize(dtype) : 4;
  const std::string stored = DTypeSize(dtype) ? dtype : "F32";
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const FloatTensor& t : s.tensors) {
    const uint64_t nbytes = uint64_t(t.data.size()) * elem;
    header[t.name] = {
        {"dtype", stored}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!s.metadata.empty()) header["__metadata__"] = s.metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::vector<uint8_t> out(8 + text.size() + offset);
  StoreLE64(out.data(), text.size());
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const FloatTensor& t : s.tensors) {
    for (float v : t.data) {
      if (elem == 4)
        StoreLEF32(p, v);
      else
        StoreLE16(p, stored == "F16" ? FloatToHalfBits(v) : FloatToBf16Bits(v));
      p += elem;
    }
  }
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const Safetensors& s,
                              const std::string& dtype) {
  if (!DTypeSize(dtype))
    return FileError(path, absl::StrFormat("cannot write dtype '%s' (F32, F16, BF16)", dtype));
  for (const FloatTensor& t : s.tensors) {
    uint64_t count = 1;
    for (uint32_t d : t.shape) count *= d;
    if (count != t.data.size())
      return FileError(path, absl::StrFormat("tensor '%s' has %d values but shape product %d",
                                             t.name, t.data.size(), count));
  }
  const std::vector<uint8_t> bytes = SerializeSafetensors(s, dtype);
  return WriteFileAtomic(path, bytes, /*zstd_level=*/19);
}

}  // namespace cact
