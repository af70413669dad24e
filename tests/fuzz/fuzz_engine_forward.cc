// The engine on files the validator accepts: a fuzzed .cact that opens is loaded as a Model
// and run through both forward paths (prefill of three tokens, then two decode steps). A path
// may refuse the geometry (engine/fast_path_limits.h) or the input with an error; it must
// never crash or read out of bounds.
#include <cstdint>
#include <vector>

#include "engine/forward.h"
#include "engine/forward_paths.h"
#include "engine/model.h"
#include "formats/cact/cact_file.h"
#include "fuzz_common.h"

using namespace cact;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = CactFile::FromBytes(
      FileBytes::FromBuffer("fuzz.cact", std::vector<uint8_t>(data, data + size)));
  if (!f.ok()) return 0;
  const Geometry g = f->geometry();
  auto model = Model::FromFile(std::move(*f));
  if (!model.ok()) return 0;
  ForwardOptions opt;
  opt.attn.window = g.kv_window;
  opt.threads = 1;
  for (const char* path : {"ref", "fast"}) {
    auto fwd = MakeForwardPath(**model, path, opt);
    if (!fwd.ok()) continue;
    std::vector<float> logits;
    const int32_t v = int32_t(g.vocab);
    const std::vector<int32_t> prompt = {2 % v, 1 % v, v - 1};
    if (!(*fwd)->Feed(prompt, &logits, true).ok()) continue;
    CACT_FUZZ_CHECK(logits.size() == prompt.size() * g.vocab, "prefill logits size");
    for (int32_t tok : {0, v / 2}) {
      const int32_t one[1] = {tok};
      if ((*fwd)->Feed(one, &logits, false).ok())
        CACT_FUZZ_CHECK(logits.size() == g.vocab, "decode logits size");
    }
  }
  return 0;
}
