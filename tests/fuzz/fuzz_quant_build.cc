// cact-quant build's library path over arbitrary weights safetensors (geometry from the
// metadata config or from the tensor shapes, scheme from the metadata bits_map, group from
// the metadata): with the micro tokenizer, an accepted build must serialize to a file that
// validates and has the weights' tensor count.
#include <cstdint>
#include <optional>

#include "formats/cact/writer.h"
#include "formats/safetensors.h"
#include "fuzz_common.h"
#include "quant/build.h"
#include "reliability/micro_model.h"

using namespace cact;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto st = ParseSafetensors({data, size}, "fuzz-weights.safetensors");
  if (!st.ok()) return 0;
  BuildRequest req;
  req.weights = &*st;
  req.weights_path = "fuzz-weights.safetensors";
  req.tokenizer = reliability::MicroTokenizer(32);
  req.tokenizer_source = "micro";
  RebuildReport report;
  auto contents = BuildCact(req, &report);
  if (!contents.ok()) {
    CACT_FUZZ_CHECK(!contents.status().message().empty(), "error has a message");
    return 0;
  }
  auto bytes = SerializeCact(*contents, "fuzz-built.cact");
  CACT_FUZZ_CHECK(bytes.ok(), "a successful build serializes to a valid file");
  return 0;
}
