// Writes small valid .cact seeds for the fuzzers (tests/reliability/micro_model.h: vocab 32,
// d_model 16, 2 layers, 1 engram site) with and without probe heads, CQ records at every
// width (2, 3, 4, ternary) and several groups, one zstd-compressed, plus the tokenizer blob.
//   make_fuzz_seeds OUT_DIR
#include <cstdio>
#include <string>

#include "formats/safetensors.h"
#include "lib/atomic_file.h"
#include "quant/synthetic.h"
#include "reliability/micro_model.h"

namespace {

// Float weights for the micro geometry, as cact-quant build expects them: canonical names,
// [out, in], the official config JSON and a bits map in the metadata.
cact::Safetensors MicroWeights(const std::vector<cact::ProbeHeadSpec>& heads,
                               const std::string& bits_map) {
  using namespace cact;
  Safetensors st;
  const Geometry g = reliability::MicroGeometry();
  uint32_t k = 0;
  for (const TensorSpec& spec : CanonicalLayout(g, heads)) {
    if (spec.kind == TensorKind::kTokenizer) continue;
    FloatTensor t;
    t.name = spec.name;
    t.shape = spec.shape;
    uint64_t n = 1;
    for (uint32_t d : spec.shape) n *= d;
    for (uint64_t i = 0; i < n; ++i)
      t.data.push_back(float(int((i * 7919 + k) % 200) - 100) / 400.0f);
    if (spec.name == "heads.manifest")
      for (size_t h = 0; h < heads.size(); ++h)
        t.data[h] = heads[h].kind == ProbeHead::kContrastive ? 1.0f : 2.0f;
    st.tensors.push_back(std::move(t));
    ++k;
  }
  st.metadata["config"] = OfficialConfigJson(g, heads);
  st.metadata["bits_map"] = bits_map;
  st.metadata["group"] = "16";
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cact;
  using namespace cact::reliability;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<ProbeHeadSpec> both = {{ProbeHead::kContrastive, 4, 4},
                                           {ProbeHead::kConfidence, 8, 1}};
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
  if (!WriteSafetensors(dir + "/micro_weights_0.safetensors",
                        MicroWeights({}, "embedding=4,default=2"))
           .ok() ||
      !WriteSafetensors(dir + "/micro_weights_1.safetensors",
                        MicroWeights(both, "embedding=3,mhc=1.58,default=2"))
           .ok())
    ++failures;
  const std::vector<uint8_t> tok = SerializeTokenizerBlob(MicroTokenizer(32));
  if (!WriteFileAtomic(dir + "/micro_tokenizer.bin", tok, 0).ok()) ++failures;
  return failures ? 1 : 0;
}
