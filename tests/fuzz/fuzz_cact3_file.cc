// The generation-3 (Needle 3) header and directory reader over arbitrary bytes. A rejection is
// one "fuzz.cact: FIELD at offset N: WHAT" line; an accepted file is fully readable (every
// blob, values, codebooks, tokenizer), its header serializes back to its first 196 bytes, its
// names are the canonical layout of its geometry, and CactFile (every other program's open
// point) refuses it with the generation-3 line.
//   CACT_FUZZ_WRITE_SEEDS=DIR fuzz_cact3_file   writes small valid Needle 3 files, exits
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/cact/accounting.h"
#include "formats/cact/cact3_file.h"
#include "formats/cact/finite_check.h"
#include "formats/cact/generation.h"
#include "formats/needle/named_geometries.h"
#include "fuzz_common.h"
#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "support/needle3_synthetic.h"

using namespace cact;

namespace {

// Small files (13 to 17 KB, under run_fuzzers.sh's 32 KB max_len): no heads, every head, all-float
// heads, no QKV taps, a per-head gate with per-block Monarch factors.
void WriteSeeds(const std::string& dir) {
  using testing::Head3;
  std::vector<testing::Synth3Options> seeds(5);
  for (testing::Synth3Options& o : seeds) {
    o.geometry = MicroGeometry3();
    o.group = 16;
    o.bits = [](const std::string& name) {
      return name == "embedding" ? 4u : name.find("q_proj") != std::string::npos ? 3u : 2u;
    };
  }
  seeds[1].layout.heads = {Head3(ProbeHead3::kEmbedding, 2, 2, 8),
                           Head3(ProbeHead3::kConfidence, 1, 2, 1),
                           Head3(ProbeHead3::kRouter, 2, 1, 3)};
  seeds[2].layout.heads = {Head3(ProbeHead3::kRouter, 2, 2, 3, /*quantized=*/false)};
  seeds[3].geometry.qkv_conv_taps = 0;
  seeds[4].layout.headwise_gate = seeds[4].layout.untied_factors = true;
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string path = dir + "/needle3_" + std::to_string(i) + ".cact";
    absl::Status s = WriteFileAtomic(path, testing::SynthesizeCact3(seeds[i]), 0);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  if (const char* dir = std::getenv("CACT_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  auto f = Cact3File::FromBytes(FileBytes::FromBuffer("fuzz.cact", bytes));
  if (!f.ok()) {
    const std::string msg(f.status().message());
    CACT_FUZZ_CHECK(msg.rfind("fuzz.cact: ", 0) == 0, "error names the file");
    CACT_FUZZ_CHECK(msg.find(" at offset ") != std::string::npos, "error names an offset");
    CACT_FUZZ_CHECK(msg.find('\n') == std::string::npos, "error is one line");
    return 0;
  }
  fuzz::TouchCactFile(f->records());
  (void)FindNonFinite(f->records(), 4);
  const Accounting a = ComputeAccounting(f->records());
  CACT_FUZZ_CHECK(a.file_bytes == size, "accounting covers the file");

  const auto header = SerializeHeader3(f->header());
  CACT_FUZZ_CHECK(std::equal(header.begin(), header.end(), data), "header round trip");
  const std::vector<TensorSpec> specs = CanonicalLayout3(f->geometry(), f->layout());
  CACT_FUZZ_CHECK(specs.size() == f->tensors().size(), "one record per canonical position");
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorEntry& t = f->tensors()[i];
    CACT_FUZZ_CHECK(t.name == specs[i].name, "canonical name");
    if (specs[i].kind != TensorKind::kTokenizer)
      CACT_FUZZ_CHECK(t.shape() == specs[i].shape, "shape from the geometry");
  }
  auto refused = CactFile::FromBytes(FileBytes::FromBuffer("fuzz.cact", std::move(bytes)));
  CACT_FUZZ_CHECK(!refused.ok() && refused.status() == Generation3Refusal("fuzz.cact"),
                  "every other program refuses generation 3");
  return 0;
}
