#include "formats/cact/writer.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/status.h"

namespace cact {

uint64_t AssignOffsets(std::vector<TensorRecord>* records, uint32_t codebook_len) {
  uint64_t pos = FirstBlobOffset(codebook_len, uint32_t(records->size()));
  for (size_t i = 0; i < records->size(); ++i) {
    TensorRecord& r = (*records)[i];
    if (i > 0) pos = AlignUp(pos, kBlobAlign);
    r.offset = pos;
    pos += r.nbytes;
  }
  return pos;
}

absl::StatusOr<std::vector<uint8_t>> SerializeCact(const CactContents& c, const std::string& name) {
  if (c.tensors.empty()) return FileError(name, "cannot write a .cact without tensors");
  if (c.tensors.size() > UINT32_MAX) return FileError(name, "too many tensors");
  std::vector<TensorRecord> records;
  records.reserve(c.tensors.size());
  for (const TensorBlob& t : c.tensors) {
    TensorRecord r = t.record;
    r.nbytes = t.bytes.size();
    records.push_back(r);
  }
  Header h;
  h.num_tensors = uint32_t(records.size());
  h.codebook_len = uint32_t(c.codebook.size());
  h.geometry = c.geometry;
  const uint64_t size = AssignOffsets(&records, h.codebook_len);

  std::vector<uint8_t> out(size, 0);  // gaps stay zero
  const auto header = SerializeHeader(h);
  std::memcpy(out.data(), header.data(), header.size());
  uint64_t pos = kHeaderBytes;
  for (float v : c.codebook) {
    std::memcpy(out.data() + pos, &v, 4);  // little-endian host (x86-64, aarch64)
    pos += 4;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const auto rec = SerializeRecord(records[i]);
    std::memcpy(out.data() + pos, rec.data(), rec.size());
    pos += rec.size();
    if (!c.tensors[i].bytes.empty())
      std::memcpy(out.data() + records[i].offset, c.tensors[i].bytes.data(),
                  c.tensors[i].bytes.size());
  }

  // Never write what we could not read back.
  auto parsed = CactFile::FromBytes(FileBytes::FromBuffer(name, out));
  if (!parsed.ok())
    return absl::InvalidArgumentError("refusing to write an invalid .cact: " +
                                      std::string(parsed.status().message()));
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const std::string& want = c.tensors[i].name;
    if (!want.empty() && want != parsed->tensors()[i].name)
      return FileError(name, absl::StrFormat("tensor %d is '%s' but the geometry puts '%s' at "
                                             "that position",
                                             i, want, parsed->tensors()[i].name));
  }
  uint64_t non_finite = 0;
  const std::vector<NonFiniteValue> bad = FindNonFinite(*parsed, 1, &non_finite);
  if (!bad.empty())
    return FileError(name, absl::StrFormat("refusing to write a non-finite value: %s (%d in all)",
                                           bad[0].Describe(), non_finite));
  return out;
}

absl::StatusOr<std::vector<uint8_t>> SerializeCact(const CactContents& c) {
  return SerializeCact(c, "<serialized .cact>");
}

absl::Status WriteCact(const std::string& path, const CactContents& c, int zstd_level) {
  CACT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, SerializeCact(c, path));
  return WriteFileAtomic(path, bytes, zstd_level);
}

}  // namespace cact
