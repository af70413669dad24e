// safetensors parser over arbitrary bytes. An accepted file must re-serialize (as F32) and
// parse back to the same names, shapes, metadata and bit-identical float values.
#include <cstdint>
#include <cstring>
#include <string>

#include "formats/safetensors.h"
#include "fuzz_common.h"

using namespace cact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto st = ParseSafetensors({data, size}, "fuzz.safetensors");
  if (!st.ok()) {
    const std::string msg(st.status().message());
    CACT_FUZZ_CHECK(msg.rfind("fuzz.safetensors: ", 0) == 0, "error names the file");
    return 0;
  }
  for (const FloatTensor& t : st->tensors) {
    uint64_t n = 1;
    for (uint32_t d : t.shape) n *= d;
    CACT_FUZZ_CHECK(n == t.data.size(), "value count = shape product");
  }
  const std::vector<uint8_t> bytes = SerializeSafetensors(*st, "F32");
  auto back = ParseSafetensors(bytes, "again.safetensors");
  CACT_FUZZ_CHECK(back.ok(), "re-serialized file parses");
  CACT_FUZZ_CHECK(back->metadata == st->metadata, "metadata round trip");
  CACT_FUZZ_CHECK(back->tensors.size() == st->tensors.size(), "tensor count round trip");
  for (size_t i = 0; i < st->tensors.size(); ++i) {
    const FloatTensor& a = st->tensors[i];
    const FloatTensor* b = back->Find(a.name);
    CACT_FUZZ_CHECK(b != nullptr, "tensor name round trip");
    CACT_FUZZ_CHECK(b->shape == a.shape, "shape round trip");
    CACT_FUZZ_CHECK(
        b->data.size() == a.data.size() &&
            (a.data.empty() || std::memcmp(b->data.data(), a.data.data(), a.data.size() * 4) == 0),
        "values round trip bit-identically");
  }
  return 0;
}
