// Synthetic generation-3 (Needle 3) .cact files for the tests and the fuzzer seeds: the
// canonical directory of a geometry, CQ blobs of seeded random codes with finite FP16 norms,
// random finite FP16 values, FP32 permutations, and a valid tokenizer blob. Written here (the
// library reads generation 3 but does not write it), laid out as the 3.x exporter does:
// 196-byte header, 28 codebook floats, 44-byte records, blobs at multiples of 64.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/cact/cq_types.h"
#include "formats/cact/header.h"
#include "formats/cact/header3.h"
#include "formats/le_bytes.h"
#include "formats/needle/named_geometries.h"
#include "formats/needle/tensor_table3.h"
#include "formats/tokenizer_blob.h"

namespace cact::testing {

struct Synth3Options {
  Geometry3 geometry = SmallGeometry3();
  Layout3Options layout;
  uint32_t group = 128;
  // CQ width of a matrix record by name; 0 stores it as FP16.
  std::function<uint32_t(const std::string&)> bits = [](const std::string&) { return 2u; };
  uint32_t tokenizer_pieces = 0;  // 0: vocab
  uint64_t tokenizer_bytes = 0;   // 0: as small as the pieces allow
  uint64_t seed = 1;
};

// The shipped file's widths: CQ4 embedding, mHC and head matrices, CQ2 everything else.
inline uint32_t ShippedBits3(const std::string& name) {
  const bool wide =
      name == "embedding" || name.rfind("mhc_", 0) == 0 || name.find("_head.") != std::string::npos;
  return wide ? 4 : 2;
}

inline ProbeHead3Spec Head3(ProbeHead3 kind, uint32_t probes, uint32_t queries, uint32_t out,
                            bool quantized = true) {
  ProbeHead3Spec h;
  h.kind = kind;
  h.probes = probes;
  h.queries = queries;
  h.out_dim = out;
  h.quantized = quantized;
  return h;
}

namespace synth3 {

struct Rng {
  uint64_t s;
  uint64_t Next() {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// A finite FP16 of magnitude in [2^-5, 4): exponent field 10 .. 16.
inline uint16_t RandomHalf(Rng& r, bool positive = false) {
  const uint64_t v = r.Next();
  const uint16_t sign = positive ? 0 : uint16_t((v >> 20) & 1) << 15;
  return uint16_t(sign | uint16_t(10 + v % 7) << 10 | uint16_t((v >> 8) & 0x3FF));
}

inline std::vector<uint8_t> TokenizerBytes(uint32_t pieces, uint64_t target) {
  TokenizerBlob t;
  const uint64_t fixed = 24 + 7ull * pieces;
  uint64_t text = target > fixed ? target - fixed : 0;
  for (uint32_t i = 0; i < pieces; ++i) {
    std::string s = std::to_string(i);
    const uint64_t want = text / (pieces - i);  // spread what is left over the rest
    if (want > s.size()) s += std::string(want - s.size(), 'x');
    text -= std::min<uint64_t>(text, s.size());
    TokenizerPiece p;
    p.surface = s;
    p.score = -float(i);
    p.type = i < 4 ? PieceType::kControl : PieceType::kNormal;
    t.pieces.push_back(p);
  }
  return SerializeTokenizerBlob(t);
}

}  // namespace synth3

// The file's bytes. Every CQ record gets group `o.group`; the codebooks are scaled for it.
inline std::vector<uint8_t> SynthesizeCact3(const Synth3Options& o) {
  const Geometry3& g = o.geometry;
  const std::vector<TensorSpec> specs = CanonicalLayout3(g, o.layout);
  synth3::Rng rng{o.seed};
  std::vector<TensorRecord> records(specs.size());
  std::vector<std::vector<uint8_t>> blobs(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    TensorRecord& r = records[i];
    r.ndim = uint8_t(s.shape.size());
    for (size_t k = 0; k < s.shape.size(); ++k) r.shape[k] = s.shape[k];
    std::vector<uint8_t>& b = blobs[i];
    const uint32_t bits = s.kind == TensorKind::kMatrix ? o.bits(s.name) : 0;
    if (s.kind == TensorKind::kTokenizer) {
      r.dtype = DType::kRAW;
      b = synth3::TokenizerBytes(o.tokenizer_pieces ? o.tokenizer_pieces : g.vocab,
                                 o.tokenizer_bytes);
    } else if (s.kind == TensorKind::kPermutation) {
      r.dtype = DType::kFP32;
      std::vector<uint32_t> perm(s.shape[0]);
      for (uint32_t k = 0; k < perm.size(); ++k) perm[k] = k;
      for (size_t k = perm.size(); k > 1; --k) std::swap(perm[k - 1], perm[rng.Next() % k]);
      b.resize(4 * perm.size());
      for (size_t k = 0; k < perm.size(); ++k) StoreLEF32(b.data() + 4 * k, float(perm[k]));
    } else if (bits) {
      r.dtype = DType::kCQ;
      r.group = o.group;
      r.bits = bits;
      const uint64_t codes = uint64_t(s.shape[0]) * CqRowCodeBytes(s.shape[1], o.group, bits);
      b.resize(CqBlobBytes(s.shape[0], s.shape[1], o.group, bits));
      for (uint64_t k = 0; k < codes; ++k) b[k] = uint8_t(rng.Next());
      for (uint64_t k = codes; k + 1 < b.size(); k += 2)
        StoreLE16(b.data() + k, synth3::RandomHalf(rng, true));
    } else {
      r.dtype = DType::kFP16;
      b.resize(2 * r.NumElements());
      for (size_t k = 0; k + 1 < b.size(); k += 2) StoreLE16(b.data() + k, synth3::RandomHalf(rng));
    }
    r.nbytes = b.size();
  }
  if (!o.layout.heads.empty()) {  // heads.manifest: the codes as FP16 1.0, 2.0, 3.0
    const uint32_t mi = CoreTensorCount3(g);
    for (size_t h = 0; h < o.layout.heads.size(); ++h) {
      const int code = int(o.layout.heads[h].kind);
      StoreLE16(blobs[mi].data() + 2 * h, code == 1 ? 0x3C00 : code == 2 ? 0x4000 : 0x4200);
    }
  }
  Header3 h;
  h.num_tensors = uint32_t(specs.size());
  h.geometry = g;
  uint64_t pos = FirstBlobOffset3(28, h.num_tensors);
  for (size_t i = 0; i < specs.size(); ++i) {
    records[i].offset = AlignUp(pos, kBlobAlign);
    pos = records[i].offset + records[i].nbytes;
  }
  std::vector<uint8_t> out(pos, 0);
  const auto header = SerializeHeader3(h);
  std::copy(header.begin(), header.end(), out.begin());
  // Codebooks: CQ2 the Lloyd-Max levels scaled for the group; CQ3 and CQ4 ascending.
  for (int k = 0; k < 28; ++k) {
    const double unit = k < 4 ? kUnitCq2Levels[k] : k < 12 ? (k - 7.5) * 0.3 : (k - 19.5) * 0.2;
    StoreLEF32(out.data() + kHeader3Bytes + 4 * k, ScaleUnitLevel(unit, o.group));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto rec = SerializeRecord(records[i]);
    std::copy(rec.begin(), rec.end(), out.begin() + kHeader3Bytes + 4 * 28 + kRecordBytes * i);
    std::copy(blobs[i].begin(), blobs[i].end(), out.begin() + records[i].offset);
  }
  return out;
}

}  // namespace cact::testing
