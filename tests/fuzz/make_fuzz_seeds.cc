// Writes small valid .cact seeds for the fuzzers (tests/reliability/micro_model.h: vocab 32,
// d_model 16, 2 layers, 1 engram site) with and without probe heads, CQ records at every
// width (2, 3, 4, ternary) and several groups, one zstd-compressed, plus the tokenizer blob.
//   make_fuzz_seeds OUT_DIR
#include <cstdio>
#include <string>

#include "lib/atomic_file.h"
#include "reliability/micro_model.h"

int main(int argc, char** argv) {
  using namespace cact;
  using namespace cact::reliability;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<ProbeHeadSpec> both = {{ProbeHead::kContrastive, 4, 4}, {ProbeHead::kConfidence, 8, 1}};
  const std::vector<ProbeHeadSpec> one = {{ProbeHead::kConfidence, 2, 1}};
  int failures = 0;
  for (uint32_t seed = 0; seed < 4; ++seed) {
    MicroOptions o;
    o.seed = seed;
    o.heads = seed == 0 ? std::vector<ProbeHeadSpec>{} : seed == 1 ? one : both;
    const std::string path = dir + "/micro_" + std::to_string(seed) + ".cact";
    absl::Status s = WriteCact(path, MicroContents(MicroGeometry(), o), 0);
    if (s.ok() && seed == 2) s = WriteCact(path + ".zst", MicroContents(MicroGeometry(), o), 3);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      ++failures;
    }
  }
  const std::vector<uint8_t> tok = SerializeTokenizerBlob(MicroTokenizer(32));
  if (!WriteFileAtomic(dir + "/micro_tokenizer.bin", tok, 0).ok()) ++failures;
  return failures ? 1 : 0;
}
