#include "formats/cact/record_checks.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/le_bytes.h"
#include "formats/tokenizer_blob.h"
#include "lib/status.h"

namespace cact {

namespace {

absl::Status CheckKind(const DirectoryView& d, uint32_t i, const TensorSpec& spec,
                       const TensorRecord& r) {
  const std::string& name = spec.name;
  const uint8_t dt = uint8_t(r.dtype);
  if (dt < 1 || dt > 4)
    return d.RecordError(i, name, "dtype", kRecDType,
                         absl::StrFormat("%d is not a dtype (1 FP16, 2 FP32, 3 CQ, 4 RAW)", dt));
  if (spec.kind == TensorKind::kTokenizer) {
    if (r.dtype != DType::kRAW)
      return d.RecordError(
          i, name, "dtype", kRecDType,
          absl::StrFormat("%s but the last record (tokenizer) must be RAW", DTypeName(r.dtype)));
    return absl::OkStatus();
  }
  if (r.dtype == DType::kRAW)
    return d.RecordError(i, name, "dtype", kRecDType,
                         "RAW but only the last record (tokenizer) may be RAW");
  if (spec.kind == TensorKind::kVector && r.dtype == DType::kCQ)
    return d.RecordError(i, name, "dtype", kRecDType,
                         absl::StrFormat("CQ but %s is an FP16/FP32 parameter", name));
  if (spec.kind == TensorKind::kPermutation && r.dtype != DType::kFP32)
    return d.RecordError(
        i, name, "dtype", kRecDType,
        absl::StrFormat("%s but %s is an FP32 permutation", DTypeName(r.dtype), name));
  return absl::OkStatus();
}

absl::Status CheckFields(const DirectoryView& d, uint32_t i, const std::string& name,
                         const TensorRecord& r) {
  if (r.pad != 0)
    return d.RecordError(i, name, "pad", kRecPad, absl::StrFormat("%d but must be 0", r.pad));
  if (r.ndim > 4)
    return d.RecordError(i, name, "ndim", kRecNdim, absl::StrFormat("%d is more than 4", r.ndim));
  for (int k = r.ndim; k < 4; ++k)
    if (r.shape[k] != 0)
      return d.RecordError(i, name, "shape", kRecShape + 4 * k,
                           absl::StrFormat("unused dim %d is %d, must be 0", k, r.shape[k]));
  if (r.dtype == DType::kRAW && r.ndim != 0)
    return d.RecordError(i, name, "ndim", kRecNdim,
                         absl::StrFormat("%d but a RAW record has ndim 0", r.ndim));
  if (r.dtype == DType::kCQ) {
    if (r.ndim != 2)
      return d.RecordError(i, name, "ndim", kRecNdim,
                           absl::StrFormat("%d but a CQ record is an [out, in] matrix", r.ndim));
    if (!FindCqType(r.bits))
      return d.RecordError(
          i, name, "bits", kRecBits,
          absl::StrFormat("%d is not a CQ width (2, 3, 4 or 5 = ternary)", r.bits));
    if (!IsValidCqGroup(r.group))
      return d.RecordError(i, name, "group", kRecGroup,
                           absl::StrFormat("%d is not a power of two in [%d, %d]", r.group,
                                           kMinCqGroup, kMaxCqGroup));
  } else {
    if (r.group != 0)
      return d.RecordError(
          i, name, "group", kRecGroup,
          absl::StrFormat("%d but a %s record has group 0", r.group, DTypeName(r.dtype)));
    if (r.bits != 0)
      return d.RecordError(
          i, name, "bits", kRecBits,
          absl::StrFormat("%d but a %s record has bits 0", r.bits, DTypeName(r.dtype)));
  }
  if (r.dtype != DType::kRAW) {
    bool overflow = false;
    uint64_t need = 0;
    if (r.dtype == DType::kCQ) {
      need = CqBlobBytes(r.shape[0], r.shape[1], r.group, r.bits, &overflow);
    } else {
      uint64_t elems = 1;
      for (int k = 0; k < r.ndim; ++k)
        overflow |= __builtin_mul_overflow(elems, uint64_t(r.shape[k]), &elems);
      overflow |= __builtin_mul_overflow(elems, uint64_t(r.dtype == DType::kFP16 ? 2 : 4), &need);
    }
    const std::string what = TypeLabel(r) + " " + RecordShapeText(r);  // "CQ2 g128 [8,16]"
    if (overflow)
      return d.RecordError(i, name, "shape", kRecShape,
                           absl::StrFormat("%s: the byte count overflows 64 bits", what));
    if (r.nbytes != need)
      return d.RecordError(i, name, "nbytes", kRecNbytes,
                           absl::StrFormat("%d but %s needs %d", r.nbytes, what, need));
  }
  const uint64_t first = d.FirstBlob();
  if (r.offset % kBlobAlign != 0)
    return d.RecordError(i, name, "offset", kRecOffset,
                         absl::StrFormat("%d is not a multiple of %d", r.offset, kBlobAlign));
  if (r.offset < first)
    return d.RecordError(i, name, "offset", kRecOffset,
                         absl::StrFormat("%d lies before the first blob offset %d (inside the "
                                         "header, codebook or directory)",
                                         r.offset, first));
  uint64_t end = 0;
  if (__builtin_add_overflow(r.offset, r.nbytes, &end) || end > d.bytes.size())
    return d.RecordError(
        i, name, "offset", kRecOffset,
        absl::StrFormat("blob [%d, +%d) extends past the end of the file (%d bytes)", r.offset,
                        r.nbytes, d.bytes.size()));
  return absl::OkStatus();
}

absl::Status CheckShape(const DirectoryView& d, uint32_t i, const TensorSpec& spec,
                        const TensorRecord& r) {
  const std::string& name = spec.name;
  const std::string expected = absl::StrCat("[", absl::StrJoin(spec.shape, ","), "]");
  if (r.ndim != spec.shape.size())
    return d.RecordError(
        i, name, "ndim", kRecNdim,
        absl::StrFormat("%d but the geometry makes %s %s", r.ndim, name, expected));
  for (size_t k = 0; k < spec.shape.size(); ++k)
    if (r.shape[k] != spec.shape[k])
      return d.RecordError(
          i, name, "shape", kRecShape + 4 * k,
          absl::StrFormat("%s but the geometry makes %s %s", RecordShapeText(r), name, expected));
  return absl::OkStatus();
}

}  // namespace

absl::Status DirectoryView::RecordError(uint32_t i, const std::string& name, const char* field,
                                        uint64_t field_pos, const std::string& what) const {
  return FormatError(file, absl::StrFormat("record %d (%s) %s", i, name, field),
                     RecordPos(i) + field_pos, what);
}

std::string RecordShapeText(const TensorRecord& r) {
  return absl::StrCat(
      "[", absl::StrJoin(std::span(r.shape.data(), std::min<size_t>(r.ndim, 4)), ","), "]");
}

absl::Status ReadCodebook(const DirectoryView& d, std::vector<float>* codebook) {
  const uint64_t start = d.header_bytes, end = start + 4ull * d.codebook_len;
  if (d.bytes.size() < end)
    return FormatError(d.file, "codebook", start,
                       absl::StrFormat("file has %d bytes, the %d codebook values end at %d",
                                       d.bytes.size(), d.codebook_len, end));
  codebook->resize(d.codebook_len);
  for (uint32_t i = 0; i < d.codebook_len; ++i) {
    const float v = LoadLEF32(d.bytes.data() + start + 4 * i);
    (*codebook)[i] = v;
    const std::string field = absl::StrFormat("codebook[%d]", i);
    bool starts = false;  // each width's codebook is sorted on its own
    for (const CqType& t : kCqTypes) starts |= t.codebook_offset == int(i);
    if (!std::isfinite(v))
      return FormatError(d.file, field, start + 4 * i, absl::StrFormat("%g is not finite", v));
    if (!starts && !(v > (*codebook)[i - 1]))
      return FormatError(d.file, field, start + 4 * i,
                         absl::StrFormat("%.9g is not above the previous value %.9g (each "
                                         "codebook must be sorted ascending)",
                                         v, (*codebook)[i - 1]));
  }
  return absl::OkStatus();
}

absl::Status ReadRecords(const DirectoryView& d, std::vector<TensorRecord>* records) {
  const uint64_t start = d.RecordPos(0), end = d.RecordPos(d.num_tensors);
  if (d.bytes.size() < end)
    return FormatError(d.file, "directory", start,
                       absl::StrFormat("file has %d bytes, the %d records of 44 bytes end at %d",
                                       d.bytes.size(), d.num_tensors, end));
  records->resize(d.num_tensors);
  for (uint32_t i = 0; i < d.num_tensors; ++i)
    (*records)[i] = ParseRecord(d.bytes.data() + d.RecordPos(i));
  return absl::OkStatus();
}

absl::Status CheckRecord(const DirectoryView& d, uint32_t i, const TensorSpec& spec,
                         const TensorRecord& r) {
  CACT_RETURN_IF_ERROR(CheckKind(d, i, spec, r));
  CACT_RETURN_IF_ERROR(CheckFields(d, i, spec.name, r));
  if (spec.kind == TensorKind::kTokenizer) return absl::OkStatus();
  return CheckShape(d, i, spec, r);
}

absl::Status CheckTokenizerRecord(const DirectoryView& d, uint32_t i, const TensorRecord& r,
                                  uint32_t vocab, bool fewer_allowed) {
  CACT_ASSIGN_OR_RETURN(TokenizerBlob tok,
                        ParseTokenizerBlob(d.bytes.subspan(r.offset, r.nbytes), d.file, r.offset));
  const uint64_t pieces = tok.pieces.size();
  if (pieces > vocab || (pieces < vocab && !fewer_allowed))
    return FormatError(d.file, absl::StrFormat("record %d (tokenizer) n_pieces", i), r.offset,
                       absl::StrFormat("%d pieces but header.vocab is %d", pieces, vocab));
  return absl::OkStatus();
}

absl::Status CheckBlobsTile(const DirectoryView& d, const std::vector<TensorRecord>& records,
                            const std::vector<TensorSpec>& specs) {
  std::vector<uint32_t> order(records.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return records[a].offset < records[b].offset; });
  uint64_t max_end = d.FirstBlob();
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorRecord& r = records[order[k]];
    if (k > 0) {
      const uint32_t p = order[k - 1];
      const TensorRecord& prev = records[p];
      if (prev.offset + prev.nbytes > r.offset)
        return d.RecordError(order[k], specs[order[k]].name, "offset", kRecOffset,
                             absl::StrFormat("blob [%d, %d) overlaps record %d (%s) [%d, %d)",
                                             r.offset, r.offset + r.nbytes, p, specs[p].name,
                                             prev.offset, prev.offset + prev.nbytes));
    }
    max_end = std::max(max_end, r.offset + r.nbytes);
  }
  if (max_end != d.bytes.size())
    return FormatError(d.file, "end of file", max_end,
                       absl::StrFormat("%d bytes follow the last blob (the file must end there)",
                                       d.bytes.size() - max_end));
  return absl::OkStatus();
}

}  // namespace cact
