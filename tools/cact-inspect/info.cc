// cact-inspect FILE: a summary that fits a terminal (file, size, checksum, generation,
// parameters, bits per weight, scheme, geometry, window, tokenizer; generation 3's rows come
// from info3.cc), the bits-per-weight accounting, and with --tensors the codebook values and
// the table of every tensor. Human, --markdown (the same content), --json (everything,
// tensors included).
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/cact/accounting.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/geometry_json.h"
#include "formats/pickle.h"
#include "formats/tokenizer_blob.h"
#include "lib/counted.h"
#include "lib/sha256.h"
#include "nlohmann/json.hpp"
#include "quant/cact_diff.h"
#include "quant/scheme_inference.h"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/info3.h"
#include "tools/cact-inspect/summary.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {
namespace {

using Json = nlohmann::ordered_json;

std::string ShapeText(const TensorEntry& t) {
  if (t.record.dtype == DType::kRAW) return "-";
  return absl::StrCat("[", absl::StrJoin(t.shape(), ", "), "]");
}

// Bits per weight of one record: blob bits over logical parameters.
double RecordBpw(const TensorEntry& t) {
  uint64_t n = t.record.NumElements();
  return n ? double(t.record.nbytes) * 8.0 / double(n) : 0.0;
}

std::string HeadsText(const CactFile& f) {
  std::vector<std::string> parts;
  for (const auto& h : f.probe_heads())
    parts.push_back(absl::StrFormat("%s (%d probes -> %d)", h.name(), h.probes, h.out_dim));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

Json HeaderJson(const Header& h) {
  Json j{{"tag", absl::StrFormat("0x%08X", h.tag)},
         {"num_tensors", h.num_tensors},
         {"codebook_len", h.codebook_len}};
  j.update(GeometryToJson(h.geometry));
  return j;
}

// The summary as (key, value) rows: what a user asks first, in the order they ask it.
SummaryRows SummaryRows2(const CactFile& f, const SummaryFacts& facts) {
  const Geometry& g = f.geometry();
  SummaryRows rows;
  auto row = [&](const char* k, const std::string& v) { rows.emplace_back(k, v); };
  row("file", FileText(f));
  row("sha256", facts.sha256);
  row("generation", absl::StrFormat("Needle 2 (.cact tag 0x%08X, %s)", f.header().tag,
                                    Counted(f.header().num_tensors, "tensor")));
  row("parameters", ParametersText(facts.accounting));
  row("scheme", facts.scheme.empty()
                    ? "(no CQ records)"
                    : absl::StrFormat("%s (inferred from the records)", facts.scheme));
  row("geometry",
      absl::StrFormat("vocab %s, d_model %d, %s, %d/%d heads x %d, max_seq_len %s",
                      Thousands(g.vocab), g.d_model, Counted(g.num_layers, "layer"), g.num_heads,
                      g.num_kv_heads, g.head_dim, Thousands(g.max_seq_len)));
  row("blocks", absl::StrFormat("Hadamard MLP n=%d, mHC %d lanes, RoPE theta %g", g.hada_n,
                                g.mhc_lanes, g.rope_theta));
  row("engram",
      EngramText(Used(g.engram_sites, g.num_engram_sites),
                 Used(g.engram_orders, g.num_engram_orders), g.num_engram_tables, g.engram_slots,
                 g.engram_sub_dim, g.engram_conv_taps, g.engram_conv_dilation));
  row("kv cache", KvCacheText(g.kv_window, g.kv_bits));
  row("codebooks", CodebooksText(f));
  row("heads", HeadsText(f));
  if (facts.tokenizer) row("tokenizer", TokenizerText(*facts.tokenizer));
  return rows;
}

void PrintSummary(const SummaryRows& rows, bool markdown) {
  for (const auto& [k, v] : rows) {
    if (markdown)
      std::printf("- %s: %s\n", k.c_str(), v.c_str());
    else
      std::printf("%-11s %s\n", k.c_str(), v.c_str());
  }
}

// The embedded codebooks' values (part of the detailed view).
void PrintCodebooks(const CactFile& f, bool markdown) {
  std::printf(markdown ? "\n### Codebooks\n\n" : "\ncodebooks\n");
  size_t off = 0;
  for (uint32_t bits : {2u, 3u, 4u}) {
    size_t n = size_t(1) << bits;
    std::vector<std::string> v;
    for (size_t i = 0; i < n && off + i < f.codebook().size(); ++i)
      v.push_back(absl::StrFormat("%.6g", f.codebook()[off + i]));
    off += n;
    std::printf(markdown ? "- CQ%u: %s\n" : "  CQ%u  [%s]\n", bits, absl::StrJoin(v, ", ").c_str());
  }
}

Json AccountingJson(const Accounting& a) {
  Json classes = Json::object();
  for (size_t i = 0; i < kNumWidthClasses; ++i) {
    const ClassStats& c = a.classes[i];
    if (!c.tensors) continue;
    classes[WidthClassName(WidthClass(i))] = {
        {"tensors", c.tensors}, {"params", c.params}, {"bytes", c.bytes}};
  }
  return Json{{"classes", classes},           {"params", a.params},
              {"cq_params", a.cq_params},     {"code_weighted_bits", a.code_weighted_bits},
              {"norm_bytes", a.norm_bytes},   {"payload_bytes", a.payload_bytes},
              {"payload_bpw", a.payload_bpw}, {"file_bytes", a.file_bytes},
              {"file_bpw", a.file_bpw}};
}

void PrintAccounting(const Accounting& a, bool markdown) {
  Table t({"class", ">tensors", ">parameters", ">bytes", ">bpw"});
  for (size_t i = 0; i < kNumWidthClasses; ++i) {
    const ClassStats& c = a.classes[i];
    if (!c.tensors) continue;
    bool raw = WidthClass(i) == WidthClass::kRAW;
    t.Add({WidthClassName(WidthClass(i)), Thousands(c.tensors),
           raw ? "(not parameters)" : Thousands(c.params), Thousands(c.bytes),
           c.params ? absl::StrFormat("%.4f", 8.0 * double(c.bytes) / double(c.params)) : ""});
  }
  t.Print(stdout, markdown, markdown ? "" : "  ");
  std::printf(markdown ? "\n" : "");
  auto line = [&](const char* k, const std::string& v) {
    if (markdown)
      std::printf("- %s: %s\n", k, v.c_str());
    else
      std::printf("  %-30s %s\n", k, v.c_str());
  };
  line("total parameters", Thousands(a.params));
  line("code-weighted width", absl::StrFormat("%.6f bits (CQ codes only)", a.code_weighted_bits));
  line("FP16 group norms", absl::StrFormat("%s bytes", Thousands(a.norm_bytes)));
  line("numeric payload", absl::StrFormat("%s bytes = %.6f bpw (codes + norms + FP16)",
                                          Thousands(a.payload_bytes), a.payload_bpw));
  line("whole file", absl::StrFormat("%s bytes = %.6f bpw", Thousands(a.file_bytes), a.file_bpw));
}

}  // namespace

int RunInfo(const Options& o) {
  {
    absl::StatusOr<FileBytes> bytes = FileBytes::Open(o.file);
    if (!bytes.ok()) return Fail(bytes.status());
    if (LooksLikePickle(bytes->span())) return RunPickleInfo(o, std::move(*bytes));
  }
  auto file = OpenAnyGeneration(o.file);
  if (!file.ok()) return Fail(file.status());
  const CactFile& f = file->records();  // generation 3: its records, blobs and codebooks
  const Cact3File* g3 = file->gen3 ? &*file->gen3 : nullptr;
  std::string sha = Sha256Hex(f.bytes().span());
  std::string scheme = InferScheme(f);
  auto tok = ParseTokenizerBlob(f.tokenizer_blob(), f.path(), f.tensors().back().record.offset);
  Accounting acc = ComputeAccounting(f);

  if (o.json) {
    Json j;
    j["file"] = f.path();
    j["generation"] = file->generation();
    j["bytes"] = f.bytes().size();
    j["zstd"] = f.bytes().decompressed();
    j["sha256"] = sha;
    j["header"] = g3 ? Header3Json(*g3) : HeaderJson(f.header());
    if (g3) j["layout"] = Layout3Json(*g3);
    j[g3 ? "widths" : "scheme"] = scheme;  // generation 3: not a cact-quant scheme
    j["codebook_group"] = f.codebook_group();
    Json cbs;
    size_t off = 0;
    for (uint32_t bits : {2u, 3u, 4u}) {
      size_t n = size_t(1) << bits;
      std::vector<float> v(f.codebook().begin() + off, f.codebook().begin() + off + n);
      cbs[std::to_string(bits)] = v;
      off += n;
    }
    j["codebooks"] = cbs;
    j["probe_heads"] = Json::array();
    for (const auto& h : f.probe_heads())
      j["probe_heads"].push_back(
          {{"name", h.name()}, {"probes", h.probes}, {"out_dim", h.out_dim}});
    if (g3) j["probe_heads"] = j["layout"]["probe_heads"];
    if (tok.ok())
      j["tokenizer"] = {{"pieces", tok->pieces.size()},
                        {"pad_id", tok->pad_id},
                        {"eos_id", tok->eos_id},
                        {"bos_id", tok->bos_id},
                        {"unk_id", tok->unk_id}};
    if (!o.no_tensors) {
      j["tensors"] = Json::array();
      for (const TensorEntry& t : f.tensors())
        j["tensors"].push_back({{"index", t.index},
                                {"name", t.name},
                                {"dtype", DTypeName(t.record.dtype)},
                                {"type", TypeLabel(t.record)},
                                {"shape", t.shape()},
                                {"bits", t.record.bits},
                                {"group", t.record.group},
                                {"offset", t.record.offset},
                                {"bytes", t.record.nbytes},
                                {"params", t.record.NumElements()},
                                {"bpw", RecordBpw(t)}});
    }
    j["accounting"] = AccountingJson(acc);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  if (o.markdown) std::printf("## %s\n\n", f.path().c_str());
  const SummaryFacts facts{sha, scheme, acc, tok.ok() ? &*tok : nullptr};
  PrintSummary(g3 ? SummaryRows3(*g3, facts) : SummaryRows2(f, facts), o.markdown);
  std::printf(o.markdown ? "\n### Accounting\n\n" : "\naccounting\n");
  PrintAccounting(acc, o.markdown);
  if (!o.tensors) {
    if (!o.markdown)
      std::printf("\n(%s: cact-inspect %s --tensors)\n",
                  "the codebook values and the table of every tensor",
                  f.path().c_str());
    return 0;
  }
  PrintCodebooks(f, o.markdown);
  std::printf(o.markdown ? "\n### Tensors\n\n" : "\ntensors\n");
  Table t({">#", "name", "type", "shape", ">bits", ">group", ">offset", ">bytes", ">bpw"});
  for (const TensorEntry& e : f.tensors())
    t.Add({std::to_string(e.index), e.name, TypeLabel(e.record), ShapeText(e),
           e.is_cq() ? std::to_string(e.record.bits) : "",
           e.is_cq() ? std::to_string(e.record.group) : "", Thousands(e.record.offset),
           Thousands(e.record.nbytes),
           e.record.dtype == DType::kRAW ? "" : absl::StrFormat("%.4f", RecordBpw(e))});
  t.Print(stdout, o.markdown, o.markdown ? "" : "  ");
  return 0;
}

}  // namespace cact::inspect
