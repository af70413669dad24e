// Small valid .cact contents for robustness tests and fuzz seeds: a micro geometry (vocab 32,
// d_model 16, 2 layers, 1 engram site) that callers may stretch to edge values the validator
// accepts (wide mHC, long heads, big CQ groups), CQ records cycling through every width and
// several groups, plausible FP16 values, and a 32-piece tokenizer with the chat markers.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/cact/writer.h"
#include "formats/needle/named_geometries.h"
#include "formats/needle/tensor_table.h"
#include "formats/tokenizer_blob.h"
#include "quant/cq/codebook.h"
#include "quant/cq/cq.h"

namespace cact::reliability {

// The micro geometry is named with the others (formats/needle/named_geometries.h).
using cact::MicroGeometry;

inline TokenizerBlob MicroTokenizer(uint32_t vocab) {
  TokenizerBlob t;
  auto add = [&](std::string s, PieceType type, float score) {
    t.pieces.push_back({std::move(s), score, type});
  };
  add("<pad>", PieceType::kControl, 0);
  add("</s>", PieceType::kControl, 0);
  add("<s>", PieceType::kControl, 0);
  add("<unk>", PieceType::kUnknown, 0);
  for (const std::string& m : ChatMarkers()) add(m, PieceType::kUserDefined, 0);
  const char* normal[] = {"\xE2\x96\x81",
                          "a",
                          "b",
                          "ab",
                          "\xE2\x96\x81"
                          "a",
                          "ba",
                          "\xC3\xA9"};
  float score = -1;
  for (const char* s : normal) add(s, PieceType::kNormal, score--);
  for (int b = 0; t.pieces.size() < vocab; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b * 37 % 256);
    add(buf, PieceType::kByte, 0);
  }
  return t;
}

// Shrinks the micro geometry to d_model `d` (Hadamard n `hada_n`, below the SIMD width):
// one engram table of d values, one order of 2, dilation 2, so the engram still fits.
inline void ShrinkDModel(Geometry* g, uint32_t d, uint32_t hada_n) {
  g->d_model = d;
  g->hada_n = hada_n;
  g->num_engram_tables = 1;
  g->engram_sub_dim = d;
  g->num_engram_orders = 1;
  g->engram_orders = {2, 0, 0, 0};
  g->engram_conv_dilation = 2;
}

struct MicroOptions {
  std::vector<ProbeHeadSpec> heads;
  uint32_t seed = 0;
  // CQ records cycle through these widths (record bits, 5 = ternary) and groups.
  std::vector<uint32_t> widths = {2, 3, 4, 5};
  std::vector<uint32_t> groups = {8, 16, 32, 128};
  bool fp32_vectors = true;  // every fifth vector as FP32 (legal, unused by the exporter)
};

// FP16 bits of a value in [0.5, 2) with a random mantissa: keeps activations tame.
inline uint16_t PlausibleHalf(std::mt19937& rng) {
  return uint16_t((14 + rng() % 2) << 10 | (rng() & 0x3FF));
}

inline CactContents MicroContents(const Geometry& g, const MicroOptions& o = {}) {
  std::mt19937 rng(o.seed);
  CactContents c;
  c.geometry = g;
  c.codebook = HeaderCodebook(128);
  uint32_t k = o.seed;
  auto push_half = [](std::vector<uint8_t>* b, uint16_t h) {
    b->push_back(uint8_t(h));
    b->push_back(uint8_t(h >> 8));
  };
  for (const TensorSpec& spec : CanonicalLayout(g, o.heads)) {
    TensorBlob t;
    t.name = spec.name;
    if (spec.kind == TensorKind::kTokenizer) {
      t.record.dtype = DType::kRAW;
      t.bytes = SerializeTokenizerBlob(MicroTokenizer(g.vocab));
    } else if (spec.kind == TensorKind::kMatrix) {
      CqShape s{spec.shape[0], spec.shape[1], o.groups[k % o.groups.size()],
                o.widths[(k / o.groups.size()) % o.widths.size()]};
      ++k;
      t.record.dtype = DType::kCQ;
      t.record.group = s.group;
      t.record.bits = s.bits;
      t.bytes.resize(s.code_bytes());
      for (auto& v : t.bytes) v = uint8_t(rng());
      for (uint64_t i = 0; i < uint64_t(s.out) * s.groups(); ++i)
        push_half(&t.bytes, PlausibleHalf(rng));
    } else if (spec.name == "heads.manifest") {  // codes 1 / 2 as FP16 1.0 / 2.0
      t.record.dtype = DType::kFP16;
      for (const ProbeHeadSpec& h : o.heads)
        push_half(&t.bytes, h.kind == ProbeHead::kContrastive ? 0x3C00 : 0x4000);
    } else {
      t.record.dtype = (o.fp32_vectors && k++ % 5 == 0) ? DType::kFP32 : DType::kFP16;
      uint64_t n = 1;
      for (uint32_t d : spec.shape) n *= d;
      for (uint64_t i = 0; i < n; ++i) {
        if (t.record.dtype == DType::kFP16) {
          push_half(&t.bytes, PlausibleHalf(rng));
        } else {
          const float f = float(rng() % 1000) / 1000.0f;
          uint32_t u;
          std::memcpy(&u, &f, 4);
          for (int b = 0; b < 4; ++b) t.bytes.push_back(uint8_t(u >> (8 * b)));
        }
      }
    }
    t.record.ndim = uint8_t(spec.shape.size());
    for (size_t d = 0; d < spec.shape.size(); ++d) t.record.shape[d] = spec.shape[d];
    c.tensors.push_back(std::move(t));
  }
  return c;
}

}  // namespace cact::reliability
