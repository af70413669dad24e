// Fixture helpers for the rebuild tests: the official dequantization as one Safetensors,
// fixture weights, and building straight to bytes.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/cact/cact_file.h"
#include "formats/cact/writer.h"
#include "formats/safetensors.h"
#include "formats/sentencepiece_model.h"
#include "lib/npy.h"
#include "quant/build.h"
#include "support/test_support.h"

namespace cact::testing {

// official_dequant/<name>.npy of every non-RAW record, in directory order, as F32 tensors.
inline Safetensors OfficialDequant(const std::string& kase) {
  Safetensors st;
  absl::StatusOr<CactFile> f = CactFile::Open(Fixture(kase, "model.cact"));
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return st;
  for (const TensorEntry& t : f->tensors()) {
    if (t.record.dtype == DType::kRAW) continue;
    absl::StatusOr<NpyArray> a = ReadNpy(Fixture(kase, "official_dequant/" + t.name + ".npy"));
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) continue;
    FloatTensor ft;
    ft.name = t.name;
    ft.shape = t.shape();
    ft.data = std::move(a->data);
    st.tensors.push_back(std::move(ft));
  }
  return st;
}

inline std::vector<uint8_t> FixtureBytes(const std::string& kase) {
  return ReadAll(Fixture(kase, "model.cact"));
}

inline std::vector<uint8_t> Serialize(const CactContents& c) {
  absl::StatusOr<std::vector<uint8_t>> b = SerializeCact(c, "test output");
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : std::vector<uint8_t>{};
}

// Header + codebook + directory bytes (everything before the first blob).
inline std::vector<uint8_t> Prefix(const std::vector<uint8_t>& file, size_t num_tensors) {
  size_t n = std::min(file.size(), FirstBlobOffset(28, uint32_t(num_tensors)));
  return std::vector<uint8_t>(file.begin(), file.begin() + n);
}

}  // namespace cact::testing
