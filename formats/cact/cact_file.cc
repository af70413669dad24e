#include "formats/cact/cact_file.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/cact/generation.h"
#include "formats/le_bytes.h"
#include "formats/tokenizer_blob.h"
#include "lib/status.h"

namespace cact {

std::vector<uint32_t> TensorEntry::shape() const {
  return std::vector<uint32_t>(record.shape.begin(),
                               record.shape.begin() + std::min<int>(record.ndim, 4));
}

uint64_t TensorEntry::rows() const {
  if (record.ndim == 0) return 0;
  return record.ndim == 1 ? 1 : record.shape[0];
}

uint64_t TensorEntry::cols() const {
  if (record.ndim == 0) return 0;
  if (record.ndim == 1) return record.shape[0];
  uint64_t c = 1;
  for (int i = 1; i < record.ndim; ++i) c *= record.shape[i];
  return c;
}

namespace {

// Byte positions of the fields inside one 44-byte record ('<BBHIIIIQQII').
constexpr uint64_t kRecDType = 0, kRecNdim = 1, kRecPad = 2, kRecShape = 4, kRecOffset = 20,
                   kRecNbytes = 28, kRecGroup = 36, kRecBits = 40;

std::string ShapeString(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::string RecordShapeString(const TensorRecord& r) {
  return ShapeString(
      std::vector<uint32_t>(r.shape.begin(), r.shape.begin() + std::min<int>(r.ndim, 4)));
}

// True when codebook value i begins one width's codebook (the sorted runs restart there).
bool StartsCodebook(uint32_t i) {
  for (const CqType& t : kCqTypes)
    if (t.codebook_offset == int(i)) return true;
  return false;
}

// Validates a parsed file; fills the CactFile's state on success.
class Validator {
 public:
  Validator(const std::string& file, std::span<const uint8_t> bytes) : file_(file), bytes_(bytes) {}

  absl::Status Run(Header* header, std::vector<float>* codebook, std::vector<TensorEntry>* tensors,
                   std::vector<ProbeHeadSpec>* heads);

 private:
  uint64_t RecordPos(uint32_t i) const {
    return kHeaderBytes + 4ull * header_.codebook_len + kRecordBytes * uint64_t(i);
  }
  absl::Status RecordError(uint32_t i, const std::string& name, const char* field,
                           uint64_t field_pos, const std::string& what) const {
    return FormatError(file_, absl::StrFormat("record %d (%s) %s", i, name, field),
                       RecordPos(i) + field_pos, what);
  }
  absl::Status CheckHeaderAndCount();
  absl::Status CheckCodebook(std::vector<float>* codebook);
  absl::Status CheckDirectoryFits();
  absl::Status DetectHeads(std::vector<ProbeHeadSpec>* heads);
  absl::Status CheckRecordSelf(uint32_t i, const std::string& name) const;
  absl::Status CheckRecordKind(uint32_t i, const TensorSpec& spec) const;
  absl::Status CheckRecordShape(uint32_t i, const TensorSpec& spec) const;
  absl::Status CheckRecord(uint32_t i, const TensorSpec& spec) const;
  absl::Status CheckNoOverlaps(const std::vector<TensorSpec>& layout) const;
  absl::Status CheckTokenizer(uint32_t i);

  const std::string& file_;
  std::span<const uint8_t> bytes_;
  Header header_;
  uint32_t core_ = 0;
  uint32_t num_heads_ = 0;
  std::vector<TensorRecord> records_;
};

absl::Status Validator::CheckHeaderAndCount() {
  const uint64_t size = bytes_.size();
  if (CactGenerationOf(bytes_) == 3) return Generation3Refusal(file_);
  if (size >= 4 && LoadLE32(bytes_.data()) != kCactTag)
    return FormatError(file_, "header.tag", 0,
                       absl::StrFormat("0x%08X is not the .cact tag 0x%08X (not a .cact file)",
                                       LoadLE32(bytes_.data()), kCactTag));
  if (size < kHeaderBytes)
    return FormatError(
        file_, "header", 0,
        absl::StrFormat("file has %d bytes, the header needs %d", size, kHeaderBytes));
  header_ = ParseHeader(bytes_.data());
  CACT_RETURN_IF_ERROR(ValidateHeader(header_, file_));
  const Geometry& g = header_.geometry;
  core_ = CoreTensorCount(g);
  std::optional<uint32_t> heads = ProbeHeadCount(g, header_.num_tensors);
  if (!heads)
    return FormatError(
        file_, "header.num_tensors", HeaderFieldOffset(1),
        absl::StrFormat("%d but the geometry implies %d (no probe heads) or "
                        "%d + 3*H (H >= 1 probe heads)",
                        header_.num_tensors, TotalTensorCount(g, 0), TotalTensorCount(g, 0) + 1));
  num_heads_ = *heads;
  return absl::OkStatus();
}

absl::Status Validator::CheckCodebook(std::vector<float>* codebook) {
  const uint64_t start = kHeaderBytes, end = start + 4ull * header_.codebook_len;
  if (bytes_.size() < end)
    return FormatError(file_, "codebook", start,
                       absl::StrFormat("file has %d bytes, the %d codebook values end at %d",
                                       bytes_.size(), header_.codebook_len, end));
  codebook->resize(header_.codebook_len);
  for (uint32_t i = 0; i < header_.codebook_len; ++i) {
    const float v = LoadLEF32(bytes_.data() + start + 4 * i);
    (*codebook)[i] = v;
    const std::string field = absl::StrFormat("codebook[%d]", i);
    if (!std::isfinite(v))
      return FormatError(file_, field, start + 4 * i, absl::StrFormat("%g is not finite", v));
    if (!StartsCodebook(i) && !(v > (*codebook)[i - 1]))
      return FormatError(file_, field, start + 4 * i,
                         absl::StrFormat("%.9g is not above the previous value %.9g (each "
                                         "codebook must be sorted ascending)",
                                         v, (*codebook)[i - 1]));
  }
  return absl::OkStatus();
}

absl::Status Validator::CheckDirectoryFits() {
  const uint64_t start = RecordPos(0), end = RecordPos(header_.num_tensors);
  if (bytes_.size() < end)
    return FormatError(file_, "directory", start,
                       absl::StrFormat("file has %d bytes, the %d records of 44 bytes end at %d",
                                       bytes_.size(), header_.num_tensors, end));
  records_.resize(header_.num_tensors);
  for (uint32_t i = 0; i < header_.num_tensors; ++i)
    records_[i] = ParseRecord(bytes_.data() + RecordPos(i));
  return absl::OkStatus();
}

// Self-consistency of one record (dtype already known valid): ndim, group/bits, nbytes from its own
// shape, offset alignment and bounds. Does not compare against the canonical layout.
absl::Status Validator::CheckRecordSelf(uint32_t i, const std::string& name) const {
  const TensorRecord& r = records_[i];
  if (r.pad != 0)
    return RecordError(i, name, "pad", kRecPad, absl::StrFormat("%d but must be 0", r.pad));
  if (r.ndim > 4)
    return RecordError(i, name, "ndim", kRecNdim, absl::StrFormat("%d is more than 4", r.ndim));
  for (int k = r.ndim; k < 4; ++k)
    if (r.shape[k] != 0)
      return RecordError(i, name, "shape", kRecShape + 4 * k,
                         absl::StrFormat("unused dim %d is %d, must be 0", k, r.shape[k]));
  if (r.dtype == DType::kRAW && r.ndim != 0)
    return RecordError(i, name, "ndim", kRecNdim,
                       absl::StrFormat("%d but a RAW record has ndim 0", r.ndim));
  if (r.dtype == DType::kCQ) {
    if (r.ndim != 2)
      return RecordError(i, name, "ndim", kRecNdim,
                         absl::StrFormat("%d but a CQ record is an [out, in] matrix", r.ndim));
    if (!FindCqType(r.bits))
      return RecordError(i, name, "bits", kRecBits,
                         absl::StrFormat("%d is not a CQ width (2, 3, 4 or 5 = ternary)", r.bits));
    if (!IsValidCqGroup(r.group))
      return RecordError(i, name, "group", kRecGroup,
                         absl::StrFormat("%d is not a power of two in [%d, %d]", r.group,
                                         kMinCqGroup, kMaxCqGroup));
  } else {
    if (r.group != 0)
      return RecordError(
          i, name, "group", kRecGroup,
          absl::StrFormat("%d but a %s record has group 0", r.group, DTypeName(r.dtype)));
    if (r.bits != 0)
      return RecordError(
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
    const std::string what = TypeLabel(r) + " " + RecordShapeString(r);  // "CQ2 g128 [8,16]"
    if (overflow)
      return RecordError(i, name, "shape", kRecShape,
                         absl::StrFormat("%s: the byte count overflows 64 bits", what));
    if (r.nbytes != need)
      return RecordError(i, name, "nbytes", kRecNbytes,
                         absl::StrFormat("%d but %s needs %d", r.nbytes, what, need));
  }
  const uint64_t first = FirstBlobOffset(header_.codebook_len, header_.num_tensors);
  if (r.offset % kBlobAlign != 0)
    return RecordError(i, name, "offset", kRecOffset,
                       absl::StrFormat("%d is not a multiple of %d", r.offset, kBlobAlign));
  if (r.offset < first)
    return RecordError(i, name, "offset", kRecOffset,
                       absl::StrFormat("%d lies before the first blob offset %d (inside the "
                                       "header, codebook or directory)",
                                       r.offset, first));
  uint64_t end = 0;
  if (__builtin_add_overflow(r.offset, r.nbytes, &end) || end > bytes_.size())
    return RecordError(i, name, "offset", kRecOffset,
                       absl::StrFormat("blob [%d, +%d) extends past the end of the file (%d bytes)",
                                       r.offset, r.nbytes, bytes_.size()));
  return absl::OkStatus();
}

// Where RAW may appear and which kinds may be CQ: checked before sizes so that a wrong
// dtype is reported as such rather than as a size mismatch.
absl::Status Validator::CheckRecordKind(uint32_t i, const TensorSpec& spec) const {
  const TensorRecord& r = records_[i];
  const std::string& name = spec.name;
  const uint8_t dt = uint8_t(r.dtype);
  if (dt < 1 || dt > 4)
    return RecordError(i, name, "dtype", kRecDType,
                       absl::StrFormat("%d is not a dtype (1 FP16, 2 FP32, 3 CQ, 4 RAW)", dt));
  if (spec.kind == TensorKind::kTokenizer) {
    if (r.dtype != DType::kRAW)
      return RecordError(
          i, name, "dtype", kRecDType,
          absl::StrFormat("%s but the last record (tokenizer) must be RAW", DTypeName(r.dtype)));
    return absl::OkStatus();
  }
  if (r.dtype == DType::kRAW)
    return RecordError(i, name, "dtype", kRecDType,
                       "RAW but only the last record (tokenizer) may be RAW");
  if (spec.kind == TensorKind::kVector && r.dtype == DType::kCQ)
    return RecordError(i, name, "dtype", kRecDType,
                       absl::StrFormat("CQ but %s is an FP16/FP32 parameter", name));
  return absl::OkStatus();
}

absl::Status Validator::CheckRecordShape(uint32_t i, const TensorSpec& spec) const {
  const TensorRecord& r = records_[i];
  const std::string& name = spec.name;
  const std::string expected = ShapeString(spec.shape);
  if (r.ndim != spec.shape.size())
    return RecordError(i, name, "ndim", kRecNdim,
                       absl::StrFormat("%d but %s is %s", r.ndim, name, expected));
  for (size_t k = 0; k < spec.shape.size(); ++k)
    if (r.shape[k] != spec.shape[k])
      return RecordError(
          i, name, "shape", kRecShape + 4 * k,
          absl::StrFormat("%s but the geometry makes %s %s", RecordShapeString(r), name, expected));
  return absl::OkStatus();
}

// All checks of one record, in the order: kind, self-consistency, layout shape.
absl::Status Validator::CheckRecord(uint32_t i, const TensorSpec& spec) const {
  CACT_RETURN_IF_ERROR(CheckRecordKind(i, spec));
  CACT_RETURN_IF_ERROR(CheckRecordSelf(i, spec.name));
  return CheckRecordShape(i, spec);
}

// Reads heads.manifest and the heads' probe counts and output sizes from their records.
absl::Status Validator::DetectHeads(std::vector<ProbeHeadSpec>* heads) {
  heads->clear();
  if (num_heads_ == 0) return absl::OkStatus();
  const uint32_t mi = core_;
  const std::string mname = "heads.manifest";
  CACT_RETURN_IF_ERROR(CheckRecord(mi, {mname, TensorKind::kVector, {num_heads_}}));
  const TensorRecord& m = records_[mi];
  const uint32_t d = header_.geometry.d_model;
  for (uint32_t h = 0; h < num_heads_; ++h) {
    const uint64_t pos = m.offset + (m.dtype == DType::kFP16 ? 2 : 4) * uint64_t(h);
    double code = 0;
    if (m.dtype == DType::kFP16) {
      const uint16_t bits = LoadLE16(bytes_.data() + pos);
      code = bits == 0x3C00 ? 1 : bits == 0x4000 ? 2 : -1;  // FP16 1.0 / 2.0
    } else {
      code = LoadLEF32(bytes_.data() + pos);
    }
    if (code != 1 && code != 2)
      return FormatError(file_, absl::StrFormat("record %d (%s) value %d", mi, mname, h), pos,
                         "not a probe head code (1 contrastive, 2 confidence)");
    ProbeHeadSpec spec;
    spec.kind = code == 1 ? ProbeHead::kContrastive : ProbeHead::kConfidence;
    for (const ProbeHeadSpec& prev : *heads)
      if (prev.kind == spec.kind)
        return FormatError(file_, absl::StrFormat("record %d (%s) value %d", mi, mname, h), pos,
                           absl::StrFormat("%s appears twice", spec.name()));
    const TensorRecord& probes = records_[mi + 1 + 3 * h];
    const TensorRecord& proj = records_[mi + 2 + 3 * h];
    spec.probes = probes.ndim ? probes.shape[0] : (spec.kind == ProbeHead::kContrastive ? 4 : 8);
    spec.out_dim = proj.ndim ? proj.shape[0] : 1;
    const uint32_t pi = mi + 1 + 3 * h;
    if (spec.probes == 0 || uint64_t(spec.probes) * d > UINT32_MAX)
      return RecordError(pi, spec.name() + ".probes", "shape", kRecShape,
                         absl::StrFormat("%d probes is not a usable probe count", spec.probes));
    if (spec.out_dim == 0)
      return RecordError(pi + 1, spec.name() + ".proj", "shape", kRecShape,
                         "output size 0 is not usable");
    heads->push_back(spec);
  }
  return absl::OkStatus();
}

absl::Status Validator::CheckNoOverlaps(const std::vector<TensorSpec>& layout) const {
  std::vector<uint32_t> order(records_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return records_[a].offset < records_[b].offset; });
  uint64_t max_end = FirstBlobOffset(header_.codebook_len, header_.num_tensors);
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorRecord& r = records_[order[k]];
    if (k > 0) {
      const uint32_t p = order[k - 1];
      const TensorRecord& prev = records_[p];
      if (prev.offset + prev.nbytes > r.offset)
        return RecordError(order[k], layout[order[k]].name, "offset", kRecOffset,
                           absl::StrFormat("blob [%d, %d) overlaps record %d (%s) [%d, %d)",
                                           r.offset, r.offset + r.nbytes, p, layout[p].name,
                                           prev.offset, prev.offset + prev.nbytes));
    }
    max_end = std::max(max_end, r.offset + r.nbytes);
  }
  if (max_end != bytes_.size())
    return FormatError(file_, "end of file", max_end,
                       absl::StrFormat("%d bytes follow the last blob (the file must end there)",
                                       bytes_.size() - max_end));
  return absl::OkStatus();
}

absl::Status Validator::CheckTokenizer(uint32_t i) {
  const TensorRecord& r = records_[i];
  CACT_ASSIGN_OR_RETURN(TokenizerBlob tok,
                        ParseTokenizerBlob(bytes_.subspan(r.offset, r.nbytes), file_, r.offset));
  if (tok.pieces.size() != header_.geometry.vocab)
    return FormatError(file_, absl::StrFormat("record %d (tokenizer) n_pieces", i), r.offset,
                       absl::StrFormat("%d pieces but header.vocab is %d", tok.pieces.size(),
                                       header_.geometry.vocab));
  return absl::OkStatus();
}

absl::Status Validator::Run(Header* header, std::vector<float>* codebook,
                            std::vector<TensorEntry>* tensors, std::vector<ProbeHeadSpec>* heads) {
  CACT_RETURN_IF_ERROR(CheckHeaderAndCount());
  CACT_RETURN_IF_ERROR(CheckCodebook(codebook));
  CACT_RETURN_IF_ERROR(CheckDirectoryFits());
  CACT_RETURN_IF_ERROR(DetectHeads(heads));
  const std::vector<TensorSpec> layout = CanonicalLayout(header_.geometry, *heads);
  for (uint32_t i = 0; i < records_.size(); ++i) {
    CACT_RETURN_IF_ERROR(CheckRecord(i, layout[i]));
  }
  CACT_RETURN_IF_ERROR(CheckNoOverlaps(layout));
  CACT_RETURN_IF_ERROR(CheckTokenizer(uint32_t(records_.size() - 1)));
  *header = header_;
  tensors->resize(records_.size());
  for (uint32_t i = 0; i < records_.size(); ++i) {
    (*tensors)[i] = TensorEntry{i, layout[i].name, layout[i].kind, records_[i]};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CactFile> CactFile::FromBytes(FileBytes bytes) {
  CactFile f;
  f.bytes_ = std::move(bytes);
  Validator v(f.bytes_.path(), f.bytes_.span());
  CACT_RETURN_IF_ERROR(v.Run(&f.header_, &f.codebook_, &f.tensors_, &f.heads_));
  f.codebook_group_ = f.codebook_.size() >= 4 ? InferCodebookGroup(f.codebook_.data()) : 0;
  return f;
}

absl::StatusOr<CactFile> CactFile::Open(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  return FromBytes(std::move(bytes));
}

std::vector<float> CactFile::CodebookFor(uint32_t bits, uint32_t group) const {
  const CqType* type = FindCqType(bits);
  if (!type) return {};
  if (type->codebook_offset < 0) {
    const float level = ScaleUnitLevel(kTernaryLevel, group);
    return {-level, 0.0f, level};
  }
  const uint32_t start = uint32_t(type->codebook_offset), n = type->levels;
  std::vector<float> cb(codebook_.begin() + start, codebook_.begin() + start + n);
  if (codebook_group_ != 0 && group != 0 && group != codebook_group_) {
    const double scale = std::sqrt(double(codebook_group_) / double(group));
    for (float& v : cb) v = float(double(v) * scale);
  }
  return cb;
}

const TensorEntry* CactFile::Find(std::string_view name) const {
  for (const TensorEntry& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> CactFile::blob(const TensorEntry& t) const {
  return bytes_.span().subspan(t.record.offset, t.record.nbytes);
}

std::span<const uint8_t> CactFile::tokenizer_blob() const { return blob(tensors_.back()); }

}  // namespace cact
