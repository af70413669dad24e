// Shared by the fuzz targets: read everything an accepted .cact exposes, so an out-of-bounds
// read anywhere behind a validated file shows up under ASan.
#pragma once
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "engine/text/tokenizer.h"
#include "formats/cact/cact_file.h"
#include "formats/tokenizer_blob.h"
#include "quant/cq/cq.h"
#include "quant/tensor_values.h"

namespace cact::fuzz {

// Fails loudly (libFuzzer records the input) when a property that must hold does not.
#define CACT_FUZZ_CHECK(cond, what)                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "property violated: %s (%s:%d)\n", what, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

inline void SingleThreaded() { omp_set_num_threads(1); }

// Values of every numeric record (whole tensor up to `max_values` elements, else the first
// and last rows of a CQ matrix), every blob byte, the codebooks and the tokenizer.
inline double TouchCactFile(const CactFile& f, uint64_t max_values = 1u << 15) {
  volatile double sum = 0;
  for (const TensorEntry& t : f.tensors()) {
    std::span<const uint8_t> b = f.blob(t);
    CACT_FUZZ_CHECK(b.data() >= f.bytes().data() &&
                        uint64_t(b.data() - f.bytes().data()) + b.size() <= f.bytes().size(),
                    "blob inside the file");
    uint32_t acc = 0;
    for (uint8_t v : b) acc += v;
    sum = sum + acc;
    if (t.record.dtype == DType::kRAW) continue;
    if (t.rows() * t.cols() <= max_values) {
      auto v = TensorValues(f, t);
      CACT_FUZZ_CHECK(v.ok(), "values of an accepted numeric record");
      CACT_FUZZ_CHECK(v->size() == t.rows() * t.cols(), "value count = rows x cols");
      for (float x : *v) sum = sum + (x == x ? x : 0);
    } else if (t.is_cq()) {
      const CqShape s = CqShapeOf(t);
      CACT_FUZZ_CHECK(s.blob_bytes() == b.size(), "CQ blob size from its shape");
      std::vector<float> row(s.in);
      const std::vector<float> cb = f.CodebookFor(t.record.bits, t.record.group);
      for (uint32_t r : {0u, s.out - 1}) {
        DequantizeRow(b, s, cb, r, row.data());
        sum = sum + row[0];
      }
    }
  }
  for (uint32_t bits : {2u, 3u, 4u, 5u})
    for (uint32_t group : {8u, 128u}) sum = sum + f.CodebookFor(bits, group).size();
  auto tok = Tokenizer::FromBytes(f.tokenizer_blob(), f.path());
  if (tok.ok()) {
    const std::vector<int32_t> ids =
        tok->Encode("fuzz <|im_start|>user\n caf\xC3\xA9 \xF0\x9F\x98\x80");
    for (int32_t id : ids)
      CACT_FUZZ_CHECK(id >= 0 && id < tok->vocab_size(), "encoded id in vocab");
    sum = sum + tok->Decode(ids).size();
  }
  return sum;
}

}  // namespace cact::fuzz
