#include "formats/cact/cact_file.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "formats/cact/generation.h"
#include "formats/cact/record_checks.h"
#include "formats/le_bytes.h"
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

// Validates a parsed file; fills the CactFile's state on success.
class Validator {
 public:
  Validator(const std::string& file, std::span<const uint8_t> bytes) : file_(file), bytes_(bytes) {}

  absl::Status Run(Header* header, std::vector<float>* codebook, std::vector<TensorEntry>* tensors,
                   std::vector<ProbeHeadSpec>* heads);

 private:
  DirectoryView View() const {
    return {file_, bytes_, kHeaderBytes, header_.codebook_len, header_.num_tensors};
  }
  absl::Status CheckHeaderAndCount();
  absl::Status DetectHeads(std::vector<ProbeHeadSpec>* heads);

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

// Reads heads.manifest and the heads' probe counts and output sizes from their records.
absl::Status Validator::DetectHeads(std::vector<ProbeHeadSpec>* heads) {
  heads->clear();
  if (num_heads_ == 0) return absl::OkStatus();
  const uint32_t mi = core_;
  const std::string mname = "heads.manifest";
  CACT_RETURN_IF_ERROR(
      CheckRecord(View(), mi, {mname, TensorKind::kVector, {num_heads_}}, records_[mi]));
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
      return View().RecordError(
          pi, spec.name() + ".probes", "shape", kRecShape,
          absl::StrFormat("%d probes is not a usable probe count", spec.probes));
    if (spec.out_dim == 0)
      return View().RecordError(pi + 1, spec.name() + ".proj", "shape", kRecShape,
                                "output size 0 is not usable");
    heads->push_back(spec);
  }
  return absl::OkStatus();
}

absl::Status Validator::Run(Header* header, std::vector<float>* codebook,
                            std::vector<TensorEntry>* tensors, std::vector<ProbeHeadSpec>* heads) {
  CACT_RETURN_IF_ERROR(CheckHeaderAndCount());
  CACT_RETURN_IF_ERROR(ReadCodebook(View(), codebook));
  CACT_RETURN_IF_ERROR(ReadRecords(View(), &records_));
  CACT_RETURN_IF_ERROR(DetectHeads(heads));
  const std::vector<TensorSpec> layout = CanonicalLayout(header_.geometry, *heads);
  for (uint32_t i = 0; i < records_.size(); ++i)
    CACT_RETURN_IF_ERROR(CheckRecord(View(), i, layout[i], records_[i]));
  CACT_RETURN_IF_ERROR(CheckBlobsTile(View(), records_, layout));
  const uint32_t last = uint32_t(records_.size() - 1);
  CACT_RETURN_IF_ERROR(CheckTokenizerRecord(View(), last, records_[last], header_.geometry.vocab,
                                            /*fewer_allowed=*/false));
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
