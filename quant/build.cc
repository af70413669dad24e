#include "quant/build.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/atomic_file.h"
#include "lib/status.h"
#include "quant/cq/codebook.h"
#include "quant/cq/fp16.h"
#include "quant/scheme_inference.h"
#include "quant/tensor_values.h"
#include "quant/weights_geometry.h"

namespace cact {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TensorRecord MakeRecord(DType dtype, const std::vector<uint32_t>& shape, uint32_t group,
                        uint32_t bits, uint64_t nbytes) {
  TensorRecord r;
  r.dtype = dtype;
  r.ndim = uint8_t(shape.size());
  for (size_t i = 0; i < shape.size() && i < 4; ++i) r.shape[i] = shape[i];
  r.nbytes = nbytes;
  if (dtype == DType::kCQ) {
    r.group = group;
    r.bits = bits;
  }
  return r;
}

bool SameProbeHeads(const std::vector<ProbeHeadSpec>& a, const std::vector<ProbeHeadSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || a[i].probes != b[i].probes || a[i].out_dim != b[i].out_dim)
      return false;
  return true;
}

// Where each CQ width and the group come from.
struct WidthPlan {
  std::function<uint32_t(const std::string&)> bits_for;
  std::string scheme_text, source;
  uint32_t group = 128;
  std::string group_source;
};

absl::StatusOr<WidthPlan> PlanWidths(const BuildRequest& req) {
  WidthPlan p;
  const auto& meta = req.weights->metadata;
  if (req.scheme) {
    Scheme s = *req.scheme;
    p.bits_for = [s](const std::string& n) { return s.BitsFor(n); };
    p.scheme_text = s.ToString();
    p.source = "--scheme";
  } else if (req.base) {
    std::map<std::string, uint32_t> widths;
    for (const TensorEntry& t : req.base->tensors())
      if (t.is_cq()) widths[t.name] = t.record.bits;
    Scheme fallback;
    if (auto it = meta.find("bits_map"); it != meta.end()) {
      if (auto s = ParseScheme(it->second); s.ok()) fallback = *s;
    }
    p.bits_for = [widths, fallback](const std::string& n) {
      auto it = widths.find(n);
      return it != widths.end() ? it->second : fallback.BitsFor(n);
    };
    p.scheme_text = InferScheme(*req.base);
    p.source = "base file widths";
  } else if (auto it = meta.find("bits_map"); it != meta.end()) {
    absl::StatusOr<Scheme> s = ParseScheme(it->second);
    if (!s.ok())
      return FileError(req.weights_path, "metadata bits_map: " + std::string(s.status().message()));
    Scheme scheme = *s;
    p.bits_for = [scheme](const std::string& n) { return scheme.BitsFor(n); };
    p.scheme_text = scheme.ToString();
    auto label = meta.find("bits_map_source");  // who chose it, when the weights say
    p.source = label != meta.end() ? label->second : "safetensors metadata bits_map";
  } else {
    Scheme scheme = *ParseScheme(kDefaultScheme);
    p.bits_for = [scheme](const std::string& n) { return scheme.BitsFor(n); };
    p.scheme_text = scheme.ToString();
    p.source = "default";
  }
  if (req.group) {
    p.group = *req.group;
    p.group_source = "--group";
  } else if (req.base && req.base->codebook_group()) {
    p.group = req.base->codebook_group();
    p.group_source = "base file";
  } else if (auto it = meta.find("group"); it != meta.end()) {
    char* end = nullptr;
    unsigned long g = std::strtoul(it->second.c_str(), &end, 10);
    if (!end || *end || g > (1u << 20))
      return FileError(req.weights_path, "metadata group '" + it->second + "' is not a number");
    p.group = uint32_t(g);
    p.group_source = "safetensors metadata";
  } else {
    p.group_source = "default";
  }
  if (!IsValidCqGroup(p.group))
    return absl::InvalidArgumentError(absl::StrFormat(
        "group %d (%s) is not a power of two between 8 and 65536", p.group, p.group_source));
  return p;
}

absl::StatusOr<std::vector<uint8_t>> TokenizerBytes(const BuildRequest& req, const Geometry& g,
                                                    std::string* source) {
  std::vector<uint8_t> bytes;
  size_t pieces = 0;
  if (req.tokenizer) {
    bytes = SerializeTokenizerBlob(*req.tokenizer);
    pieces = req.tokenizer->pieces.size();
    *source = req.tokenizer_source.empty() ? "--tokenizer" : req.tokenizer_source;
  } else if (req.base) {
    std::span<const uint8_t> blob = req.base->tokenizer_blob();
    bytes.assign(blob.begin(), blob.end());
    CACT_ASSIGN_OR_RETURN(TokenizerBlob t, ParseTokenizerBlob(blob, req.base->path()));
    pieces = t.pieces.size();
    *source = "base file (bytes copied)";
  } else {
    return absl::InvalidArgumentError(
        "no tokenizer: give a SentencePiece tokenizer model or a base .cact");
  }
  if (pieces != g.vocab)
    return absl::InvalidArgumentError(
        absl::StrFormat("the tokenizer from %s has %d pieces but the model's vocab is %d", *source,
                        pieces, g.vocab));
  return bytes;
}

}  // namespace

TensorRecord PlannedRecord(const TensorSpec& spec, uint32_t bits, uint32_t group,
                           uint64_t tokenizer_bytes) {
  switch (spec.kind) {
    case TensorKind::kTokenizer:
      return MakeRecord(DType::kRAW, {}, 0, 0, tokenizer_bytes);
    case TensorKind::kMatrix:
      return MakeRecord(DType::kCQ, spec.shape, group, bits,
                        CqShape{spec.shape[0], spec.shape[1], group, bits}.blob_bytes());
    case TensorKind::kPermutation:  // Needle 3's hada_p1/p2, stored as FP32 indices
      return MakeRecord(DType::kFP32, spec.shape, 0, 0, uint64_t(spec.shape.at(0)) * 4);
    case TensorKind::kVector:
      break;
  }
  uint64_t n = 1;
  for (uint32_t d : spec.shape) n *= d;
  return MakeRecord(DType::kFP16, spec.shape, 0, 0, n * 2);
}

CarriedTensor CarryTensor(const TensorEntry& t) {
  CarriedTensor c;
  c.outcome.name = c.blob.name = t.name;
  c.outcome.shape = t.shape();
  c.outcome.source = c.outcome.target = TypeLabel(t.record);
  c.blob.record = t.record;
  return c;
}

void CopyBlobBytes(const CactFile& file, const TensorEntry& t, TensorBlob* blob) {
  std::span<const uint8_t> b = file.blob(t);
  blob->bytes.assign(b.begin(), b.end());
}

bool HasStandardCodebook(const CactFile& f, uint32_t group) {
  std::vector<float> want = HeaderCodebook(group);
  std::span<const float> have = f.codebook();
  return have.size() == want.size() &&
         std::memcmp(have.data(), want.data(), want.size() * sizeof(float)) == 0;
}

absl::StatusOr<CactContents> BuildCact(const BuildRequest& req, RebuildReport* report,
                                       const TensorCallback& on_tensor) {
  if (!req.weights) return absl::InvalidArgumentError("no weights");
  const CactFile* base = req.base;
  CACT_ASSIGN_OR_RETURN(WeightsModel model,
                        DescribeWeights(*req.weights, req.weights_path, req.config_json,
                                        base ? &base->geometry() : nullptr, req.kv_window));
  if (base && !SameProbeHeads(model.heads, base->probe_heads()))
    return FileError(req.weights_path, "the weights' probe heads differ from the base file's");
  CACT_ASSIGN_OR_RETURN(WidthPlan widths, PlanWidths(req));
  const std::vector<TensorSpec> layout = CanonicalLayout(model.geometry, model.heads);
  if (req.scheme) {
    std::vector<std::string> matrices;
    for (const TensorSpec& t : layout)
      if (t.kind == TensorKind::kMatrix) matrices.push_back(t.name);
    CACT_RETURN_IF_ERROR(CheckRulesMatch(*req.scheme, matrices));
  }
  std::string tokenizer_source;
  CACT_ASSIGN_OR_RETURN(std::vector<uint8_t> tokenizer,
                        TokenizerBytes(req, model.geometry, &tokenizer_source));

  report->scheme = widths.scheme_text;
  report->scheme_source = widths.source;
  report->group = widths.group;
  report->geometry_source = model.geometry_source;
  report->tokenizer_source = tokenizer_source;
  report->dry_run = req.dry_run;

  CactContents out;
  out.geometry = model.geometry;
  out.codebook = HeaderCodebook(widths.group);
  // Base bytes are only meaningful under the same header codebook.
  const bool base_codebook_ok = base && HasStandardCodebook(*base, widths.group);
  if (base && !base_codebook_ok && req.keep != KeepPolicy::kNever)
    report->notes.push_back(
        absl::StrFormat("the base's stored codebook is not the standard g%d codebook: no CQ "
                        "bytes can be kept",
                        widths.group));

  const size_t n = layout.size();
  std::vector<TensorOutcome> outcomes(n);
  std::vector<TensorBlob> blobs(n);
  // One tensor: keep the base bytes, quantize, or encode FP16. Thread-safe.
  auto process = [&](size_t i) -> absl::Status {
    const TensorSpec& spec = layout[i];
    TensorOutcome& o = outcomes[i];
    o.name = spec.name;
    o.shape = spec.shape;
    TensorBlob& blob = blobs[i];
    blob.name = spec.name;
    const TensorEntry* base_entry = base ? base->Find(spec.name) : nullptr;
    // Compares the input values with the base's; on a match the base bytes are taken over.
    auto try_keep = [&](std::span<const float> values, std::span<const float> base_values) {
      KeepDecision d = DecideKeep(values, base_values, req.keep, req.keep_tolerance);
      o.reason = d.reason;
      if (!d.keep) return false;
      CopyBlobBytes(*base, *base_entry, &blob);
      o.action = TensorAction::kKept;
      return true;
    };

    if (spec.kind == TensorKind::kTokenizer) {
      o.source = o.target = "RAW";
      o.action = TensorAction::kCopied;
      o.reason = tokenizer_source;
      blob.record = PlannedRecord(spec, 0, 0, tokenizer.size());
      blob.bytes = tokenizer;
    } else {
      const FloatTensor& w = *req.weights->Find(spec.name);  // DescribeWeights checked presence
      o.source = Lower(w.stored_dtype);
      if (spec.kind == TensorKind::kMatrix) {
        const uint32_t bits = widths.bits_for(spec.name);
        const CqShape shape{spec.shape[0], spec.shape[1], widths.group, bits};
        blob.record = PlannedRecord(spec, bits, widths.group, 0);
        o.target = TypeLabel(blob.record);
        bool kept = false;
        std::vector<float> base_values;  // the base's values, when its bytes are comparable
        if (base_entry && req.keep != KeepPolicy::kNever) {
          const TensorRecord& br = base_entry->record;
          if (br.dtype != DType::kCQ || br.bits != bits || br.group != widths.group) {
            o.reason = absl::StrFormat("base is %s, scheme asks %s", TypeLabel(br), o.target);
          } else if (!base_codebook_ok) {
            o.reason = "base codebook is not the standard one";
          } else {
            base_values.resize(w.data.size());
            const std::vector<float> base_cb = base->CodebookFor(bits, widths.group);
            DequantizeBlob(base->blob(*base_entry), shape, base_cb, base_values.data());
            kept = try_keep(w.data, base_values);
          }
        } else if (base_entry) {
          o.reason = "--force-requantize";
        }
        if (!kept) {
          const std::vector<float> cb = CqCodebook(bits, widths.group);
          if (!base_values.empty()) {
            // An edit of the base: its unchanged groups keep their bytes, edited ones are
            // refitted, groups holding new values are quantized as a fresh build would.
            o.action = TensorAction::kReencoded;
            if (!req.dry_run) {
              ReencodeOptions ro;
              ro.keep_tolerance = req.keep == KeepPolicy::kExact ? 0.0 : req.keep_tolerance;
              ro.quantize_far_groups = true;
              ro.rotation = req.rotation;
              const ReencodeResult r = ReencodeMatrix(base->blob(*base_entry), shape, cb,
                                                      w.data.data(), base_values.data(), ro);
              blob.bytes = r.blob;
              o.rel_mse = r.rel_mse;
              if (r.kept + r.reencoded == 0) {
                o.action = TensorAction::kQuantized;  // new values throughout: a fresh build
              } else {
                o.groups = GroupFiguresOf(r);
              }
            }
          } else {
            o.action = TensorAction::kQuantized;
            if (!req.dry_run) {
              CqMatrix m = QuantizeMatrix(w.data.data(), shape, cb, req.rotation);
              o.rel_mse = m.rel_mse();
              blob.bytes = PackBlob(m);
            }
          }
        }
      } else {
        blob.record = PlannedRecord(spec, 0, 0, 0);
        o.target = "FP16";
        bool kept = false;
        if (base_entry && req.keep != KeepPolicy::kNever &&
            base_entry->record.dtype == DType::kFP16) {
          CACT_ASSIGN_OR_RETURN(std::vector<float> base_values, TensorValues(*base, *base_entry));
          kept = try_keep(w.data, base_values);
        }
        if (!kept) {
          o.action = TensorAction::kEncoded;
          blob.bytes.resize(w.data.size() * 2);
          for (size_t k = 0; k < w.data.size(); ++k) {
            const uint16_t h = FloatToHalf(w.data[k]);
            blob.bytes[2 * k] = uint8_t(h);
            blob.bytes[2 * k + 1] = uint8_t(h >> 8);
          }
        }
      }
    }
    o.bytes = blob.record.nbytes;
    return absl::OkStatus();
  };

  // OpenMP over tensors (the rows of each tensor then run on one thread: no nested
  // teams). Progress is reported in directory order as soon as a prefix is finished.
  std::vector<absl::Status> status(n);
  std::vector<char> done(n, 0);
  std::mutex mu;
  size_t next = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < int64_t(n); ++i) {
    status[i] = process(size_t(i));
    std::lock_guard<std::mutex> lock(mu);
    done[i] = 1;
    for (; next < n && done[next]; ++next)
      if (on_tensor && status[next].ok()) on_tensor(next + 1, n, outcomes[next]);
  }
  for (const absl::Status& st : status) CACT_RETURN_IF_ERROR(st);
  report->tensors = std::move(outcomes);
  out.tensors = std::move(blobs);
  return out;
}

absl::Status FinishRebuild(const CactContents& contents, const std::string& path, int zstd_level,
                           RebuildReport* report) {
  std::vector<TensorRecord> records;
  for (const TensorBlob& t : contents.tensors) records.push_back(t.record);
  report->file_bytes = AssignOffsets(&records, uint32_t(contents.codebook.size()));
  report->accounting = ComputeAccounting(records, report->file_bytes);
  report->output = path;
  report->zstd = path.size() > 4 && path.ends_with(".zst");
  if (report->dry_run) return absl::OkStatus();
  CACT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, SerializeCact(contents, path));
  report->file_bytes = bytes.size();
  CACT_RETURN_IF_ERROR(WriteFileAtomic(path, bytes, zstd_level));
  std::error_code ec;
  report->written_bytes = std::filesystem::file_size(path, ec);
  if (ec) report->written_bytes = 0;
  return absl::OkStatus();
}

}  // namespace cact
