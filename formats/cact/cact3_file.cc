#include "formats/cact/cact3_file.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "formats/cact/record_checks.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

namespace {

// Most records the heads can add: the manifest, then embedding, confidence, router heads.
constexpr uint32_t kMaxHeadRecords = 1 + 6 + 6 + 7;

// The container's Needle 2 geometry is all zero, so nothing can be sized from it.
Geometry EmptyGeometry() {
  Geometry g;
  for (uint32_t* f : {&g.kv_window, &g.kv_bits, &g.vocab, &g.d_model, &g.num_heads, &g.num_kv_heads,
                      &g.num_layers, &g.head_dim, &g.max_seq_len, &g.hada_n, &g.mhc_lanes,
                      &g.engram_slots, &g.engram_sub_dim, &g.num_engram_tables, &g.engram_conv_taps,
                      &g.engram_conv_dilation, &g.num_engram_orders, &g.num_engram_sites})
    *f = 0;
  g.engram_orders = {};
  g.engram_sites = {};
  g.rope_theta = 0;
  return g;
}

class Validator3 {
 public:
  Validator3(const std::string& file, std::span<const uint8_t> bytes)
      : file_(file), bytes_(bytes) {}
  absl::Status Run(Header3* header, std::vector<float>* codebook, Layout3Options* layout,
                   std::vector<TensorEntry>* tensors);

 private:
  DirectoryView View() const {
    return {file_, bytes_, kHeader3Bytes, header_.codebook_len, header_.num_tensors};
  }
  absl::Status CheckHeaderAndCount();
  absl::Status DetectLayout();
  absl::Status DetectHeads();
  absl::Status CheckPermutation(uint32_t i, const std::string& name) const;
  absl::Status CountError(uint32_t implied) const {
    return FormatError(file_, "header.num_tensors", Header3FieldOffset(1),
                       absl::StrFormat("%d but the geometry and heads.manifest imply %d",
                                       header_.num_tensors, implied));
  }

  const std::string& file_;
  std::span<const uint8_t> bytes_;
  Header3 header_;
  uint32_t core_ = 0;
  Layout3Options layout_;
  std::vector<TensorRecord> records_;
};

absl::Status Validator3::CheckHeaderAndCount() {
  if (bytes_.size() >= 4 && LoadLE32(bytes_.data()) != kCact3Tag)
    return FormatError(file_, "header.tag", 0,
                       absl::StrFormat("0x%08X is not the Needle 3 tag 0x%08X",
                                       LoadLE32(bytes_.data()), kCact3Tag));
  if (bytes_.size() < kHeader3Bytes)
    return FormatError(file_, "header", 0,
                       absl::StrFormat("file has %d bytes, the Needle 3 header needs %d",
                                       bytes_.size(), kHeader3Bytes));
  header_ = ParseHeader3(bytes_.data());
  CACT_RETURN_IF_ERROR(ValidateHeader3(header_, file_));
  core_ = CoreTensorCount3(header_.geometry);
  const uint32_t n = header_.num_tensors;
  if (n != core_ + 1 && (n < core_ + 1 + 7 || n > core_ + 1 + kMaxHeadRecords))
    return FormatError(file_, "header.num_tensors", Header3FieldOffset(1),
                       absl::StrFormat("%d but the geometry implies %d (no probe heads) or "
                                       "%d to %d (probe heads)",
                                       n, core_ + 1, core_ + 1 + 7, core_ + 1 + kMaxHeadRecords));
  return absl::OkStatus();
}

// The manifest's codes (1 embedding, 2 confidence, 3 router, ascending), then each head's
// probe count, query count and output size from its probes, query and proj records.
absl::Status Validator3::DetectHeads() {
  const uint32_t n = header_.num_tensors, mi = core_;
  if (n == core_ + 1) return absl::OkStatus();
  const std::string mname = "heads.manifest";
  const TensorRecord& m = records_[mi];
  const DirectoryView d = View();
  if (m.ndim != 1 || m.shape[0] < 1 || m.shape[0] > 3)
    return d.RecordError(
        mi, mname, "shape", kRecShape,
        absl::StrFormat("%s but the manifest lists 1 to 3 heads", RecordShapeText(m)));
  const uint32_t H = m.shape[0];
  CACT_RETURN_IF_ERROR(CheckRecord(d, mi, {mname, TensorKind::kVector, {H}}, m));
  const Geometry3& g = header_.geometry;
  const uint32_t rows = g.num_layers + 1;
  uint32_t j = mi + 1;
  for (uint32_t h = 0; h < H; ++h) {
    const uint64_t pos = m.offset + (m.dtype == DType::kFP16 ? 2 : 4) * uint64_t(h);
    int code = 0;
    if (m.dtype == DType::kFP16) {
      const uint16_t bits = LoadLE16(bytes_.data() + pos);  // FP16 1.0, 2.0, 3.0
      code = bits == 0x3C00 ? 1 : bits == 0x4000 ? 2 : bits == 0x4200 ? 3 : 0;
    } else {
      const float v = LoadLEF32(bytes_.data() + pos);
      code = v == 1 ? 1 : v == 2 ? 2 : v == 3 ? 3 : 0;
    }
    const std::string field = absl::StrFormat("record %d (%s) value %d", mi, mname, h);
    if (code == 0)
      return FormatError(file_, field, pos,
                         "not a probe head code (1 embedding, 2 confidence, 3 router)");
    if (!layout_.heads.empty() && code <= int(layout_.heads.back().kind))
      return FormatError(file_, field, pos,
                         absl::StrFormat("code %d after code %d (the heads are listed once each, "
                                         "in the order 1, 2, 3)",
                                         code, int(layout_.heads.back().kind)));
    ProbeHead3Spec spec;
    spec.kind = ProbeHead3(code);
    if (j + spec.record_count() > n - 1) return CountError(j + spec.record_count() + 1);
    const TensorRecord &probes = records_[j], &query = records_[j + 2], &proj = records_[j + 4];
    spec.quantized = probes.dtype == DType::kCQ;
    if (spec.quantized)
      spec.probes = probes.ndim == 2 && probes.shape[0] % rows == 0 ? probes.shape[0] / rows : 0;
    else
      spec.probes = probes.ndim == 3 ? probes.shape[1] : 0;
    spec.queries = query.ndim == 2 ? query.shape[0] : 0;
    spec.out_dim = proj.ndim == 2 ? proj.shape[0] : 0;
    const std::string p = spec.name() + ".";
    if (spec.probes == 0)
      return d.RecordError(
          j, p + "probes", "shape", kRecShape,
          absl::StrFormat("%s %s is not %d rows x k probes (CQ [%d*k, d]; float [%d, k, d])",
                          DTypeName(probes.dtype), RecordShapeText(probes), rows, rows, rows));
    if (spec.queries == 0 || uint64_t(spec.queries) * g.d_model > UINT32_MAX)
      return d.RecordError(
          j + 2, p + "query", "shape", kRecShape,
          absl::StrFormat("%s is not a usable [queries, d_model] matrix", RecordShapeText(query)));
    if (spec.out_dim == 0)
      return d.RecordError(
          j + 4, p + "proj", "shape", kRecShape,
          absl::StrFormat("%s: output size 0 is not usable", RecordShapeText(proj)));
    j += spec.record_count();
    layout_.heads.push_back(spec);
  }
  if (j != n - 1) return CountError(j + 1);
  return absl::OkStatus();
}

// Layer 0's records say whether the attention gate is per head and whether the Monarch
// factors are per block; every layer is then checked against that choice.
absl::Status Validator3::DetectLayout() {
  const Geometry3& g = header_.geometry;
  const std::vector<TensorSpec> core = CanonicalLayout3(g, {});
  for (uint32_t i = 0; i < core_; ++i) {
    const TensorRecord& r = records_[i];
    if (core[i].name == "layer00.gate_proj")
      layout_.headwise_gate =
          r.ndim == 2 && r.shape[0] == g.num_heads && g.num_heads != g.attn_out_dim();
    if (core[i].name == "layer00.w1a") layout_.untied_factors = r.ndim == 3;
  }
  return DetectHeads();
}

// hada_p1 / hada_p2 index the Hadamard lanes: each of 0 .. n-1 exactly once.
absl::Status Validator3::CheckPermutation(uint32_t i, const std::string& name) const {
  const TensorRecord& r = records_[i];
  const uint32_t n = r.shape[0];
  std::vector<bool> seen(n, false);
  for (uint32_t k = 0; k < n; ++k) {
    const uint64_t pos = r.offset + 4ull * k;
    const float v = LoadLEF32(bytes_.data() + pos);
    const bool index = v >= 0 && v < float(n) && v == std::floor(v);
    if (!index || seen[uint32_t(v)])
      return FormatError(file_, absl::StrFormat("record %d (%s) value %d", i, name, k), pos,
                         absl::StrFormat("%g is %s (a permutation of 0 .. %d)", v,
                                         index ? "repeated" : "not an index", n - 1));
    seen[uint32_t(v)] = true;
  }
  return absl::OkStatus();
}

absl::Status Validator3::Run(Header3* header, std::vector<float>* codebook, Layout3Options* layout,
                             std::vector<TensorEntry>* tensors) {
  CACT_RETURN_IF_ERROR(CheckHeaderAndCount());
  CACT_RETURN_IF_ERROR(ReadCodebook(View(), codebook));
  CACT_RETURN_IF_ERROR(ReadRecords(View(), &records_));
  CACT_RETURN_IF_ERROR(DetectLayout());
  const std::vector<TensorSpec> specs = CanonicalLayout3(header_.geometry, layout_);
  for (uint32_t i = 0; i < records_.size(); ++i)
    CACT_RETURN_IF_ERROR(CheckRecord(View(), i, specs[i], records_[i]));
  CACT_RETURN_IF_ERROR(CheckBlobsTile(View(), records_, specs));
  for (uint32_t i = 0; i < records_.size(); ++i)
    if (specs[i].kind == TensorKind::kPermutation)
      CACT_RETURN_IF_ERROR(CheckPermutation(i, specs[i].name));
  const uint32_t last = uint32_t(records_.size() - 1);
  CACT_RETURN_IF_ERROR(CheckTokenizerRecord(View(), last, records_[last], header_.geometry.vocab,
                                            /*fewer_allowed=*/true));
  *header = header_;
  *layout = layout_;
  tensors->resize(records_.size());
  for (uint32_t i = 0; i < records_.size(); ++i)
    (*tensors)[i] = TensorEntry{i, specs[i].name, specs[i].kind, records_[i]};
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Cact3File> Cact3File::FromBytes(FileBytes bytes) {
  Cact3File f;
  CactFile& c = f.file_;
  c.bytes_ = std::move(bytes);
  c.generation_ = 3;
  Validator3 v(c.bytes_.path(), c.bytes_.span());
  CACT_RETURN_IF_ERROR(v.Run(&f.header_, &c.codebook_, &f.layout_, &c.tensors_));
  c.header_ = Header{kCact3Tag, f.header_.num_tensors, f.header_.codebook_len, EmptyGeometry()};
  c.codebook_group_ = c.codebook_.size() >= 4 ? InferCodebookGroup(c.codebook_.data()) : 0;
  return f;
}

absl::StatusOr<Cact3File> Cact3File::Open(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  return FromBytes(std::move(bytes));
}

}  // namespace cact
