// Writes small valid .cact seeds for the fuzzers: a micro geometry (vocab 32, d_model 16,
// 2 layers, 1 engram site) with and without probe heads, CQ records at every width
// (2, 3, 4, ternary) and several groups, plus its tokenizer blob on its own.
//   make_fuzz_seeds OUT_DIR
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "formats/cact/layout.h"
#include "formats/cact/writer.h"
#include "formats/tokenizer_blob.h"
#include "lib/atomic_file.h"
#include "quant/codebook.h"
#include "quant/cq.h"

namespace cact {
namespace {

Geometry Micro() {
  Geometry g;
  g.kv_window = 16;
  g.vocab = 32;
  g.d_model = 16;
  g.num_heads = 2;
  g.num_kv_heads = 1;
  g.num_layers = 2;
  g.head_dim = 8;
  g.max_seq_len = 64;
  g.hada_n = 16;
  g.mhc_lanes = 2;
  g.engram_slots = 8;
  g.engram_sub_dim = 8;
  g.num_engram_tables = 2;
  g.engram_conv_taps = 4;
  g.engram_conv_dilation = 3;
  g.num_engram_orders = 2;
  g.engram_orders = {2, 3, 0, 0};
  g.num_engram_sites = 1;
  g.engram_sites = {1, 0, 0, 0};
  g.rope_theta = 10000.0f;
  return g;
}

TokenizerBlob MicroTokenizer(uint32_t vocab) {
  TokenizerBlob t;
  auto add = [&](std::string s, PieceType type, float score) { t.pieces.push_back({std::move(s), score, type}); };
  add("<pad>", PieceType::kControl, 0);
  add("</s>", PieceType::kControl, 0);
  add("<s>", PieceType::kControl, 0);
  add("<unk>", PieceType::kUnknown, 0);
  for (const std::string& m : ChatMarkers()) add(m, PieceType::kUserDefined, 0);
  const char* normal[] = {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "ba", "\xC3\xA9"};
  float score = -1;
  for (const char* s : normal) add(s, PieceType::kNormal, score--);
  for (int b = 0; t.pieces.size() < vocab; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b * 37 % 256);
    add(buf, PieceType::kByte, 0);
  }
  return t;
}

std::vector<uint8_t> RandomBytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

// FP16 bits of a value in [0.5, 2): sign 0, exponent 14 or 15, random mantissa.
uint16_t PlausibleHalf(std::mt19937& rng) { return uint16_t((14 + rng() % 2) << 10 | (rng() & 0x3FF)); }

absl::Status WriteSeed(const std::string& path, const std::vector<ProbeHeadSpec>& heads,
                       uint32_t seed) {
  const Geometry g = Micro();
  std::mt19937 rng(seed);
  CactContents c;
  c.geometry = g;
  c.codebook = HeaderCodebook(128);
  const uint32_t widths[] = {2, 3, 4, 5};
  const uint32_t groups[] = {8, 16, 32, 128};
  uint32_t k = seed;
  for (const TensorSpec& spec : CanonicalLayout(g, heads)) {
    TensorBlob t;
    t.name = spec.name;
    if (spec.kind == TensorKind::kTokenizer) {
      t.record.dtype = DType::kRAW;
      t.bytes = SerializeTokenizerBlob(MicroTokenizer(g.vocab));
    } else if (spec.kind == TensorKind::kMatrix) {
      CqShape s{spec.shape[0], spec.shape[1], groups[k % 4], widths[(k / 4) % 4]};
      ++k;
      t.record.dtype = DType::kCQ;
      t.record.group = s.group;
      t.record.bits = s.bits;
      t.bytes = RandomBytes(s.code_bytes(), rng);
      for (uint64_t i = 0; i < uint64_t(s.out) * s.groups(); ++i) {
        const uint16_t h = PlausibleHalf(rng);
        t.bytes.push_back(uint8_t(h));
        t.bytes.push_back(uint8_t(h >> 8));
      }
    } else {
      t.record.dtype = (k++ % 5 == 0) ? DType::kFP32 : DType::kFP16;
      uint64_t n = 1;
      for (uint32_t d : spec.shape) n *= d;
      for (uint64_t i = 0; i < n; ++i) {
        if (t.record.dtype == DType::kFP16) {
          const uint16_t h = PlausibleHalf(rng);
          t.bytes.push_back(uint8_t(h));
          t.bytes.push_back(uint8_t(h >> 8));
        } else {
          const float f = float(rng() % 1000) / 1000.0f;
          uint32_t u;
          std::memcpy(&u, &f, 4);
          for (int b = 0; b < 4; ++b) t.bytes.push_back(uint8_t(u >> (8 * b)));
        }
      }
      if (spec.name == "heads.manifest") {  // codes must be 1 / 2 (FP16 1.0 / 2.0)
        t.record.dtype = DType::kFP16;
        t.bytes.clear();
        for (const ProbeHeadSpec& h : heads) {
          const uint16_t v = h.kind == ProbeHead::kContrastive ? 0x3C00 : 0x4000;
          t.bytes.push_back(uint8_t(v));
          t.bytes.push_back(uint8_t(v >> 8));
        }
      }
    }
    t.record.ndim = uint8_t(spec.shape.size());
    for (size_t d = 0; d < spec.shape.size(); ++d) t.record.shape[d] = spec.shape[d];
    c.tensors.push_back(std::move(t));
  }
  return WriteCact(path, c, 0);
}

}  // namespace
}  // namespace cact

int main(int argc, char** argv) {
  using namespace cact;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<ProbeHeadSpec> both = {{ProbeHead::kContrastive, 4, 4}, {ProbeHead::kConfidence, 8, 1}};
  const std::vector<ProbeHeadSpec> one = {{ProbeHead::kConfidence, 2, 1}};
  int failures = 0;
  for (uint32_t seed = 0; seed < 4; ++seed) {
    const std::vector<ProbeHeadSpec>& heads = seed == 0 ? std::vector<ProbeHeadSpec>{} : seed == 1 ? one : both;
    const std::string path = dir + "/micro_" + std::to_string(seed) + ".cact";
    absl::Status s = WriteSeed(path, heads, seed);
    if (s.ok() && seed == 2) s = WriteSeed(path + ".zst", heads, seed);  // zstd-compressed
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      ++failures;
    } else {
      std::printf("wrote %s\n", path.c_str());
    }
  }
  const std::vector<uint8_t> tok = SerializeTokenizerBlob(MicroTokenizer(32));
  if (!WriteFileAtomic(dir + "/micro_tokenizer.bin", tok, 0).ok()) ++failures;
  return failures ? 1 : 0;
}
