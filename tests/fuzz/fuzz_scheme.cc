// Scheme parser over arbitrary text. An accepted scheme prints to a canonical string that
// parses to the same rules, and every lookup returns a valid record width.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "quant/scheme.h"

using namespace cact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = ParseScheme(text);
  if (!s.ok()) {
    CACT_FUZZ_CHECK(!s.status().message().empty(), "error has a message");
    return 0;
  }
  const std::string canonical = s->ToString();
  auto again = ParseScheme(canonical);
  CACT_FUZZ_CHECK(again.ok(), "canonical text parses");
  CACT_FUZZ_CHECK(again->ToString() == canonical, "canonical text is a fixed point");
  CACT_FUZZ_CHECK(again->rules == s->rules && again->default_bits == s->default_bits, "same rules");
  for (const char* name : {"embedding", "layer00.q_proj", "layer26.out_proj", "mhc_phi_res",
                           "engram1.tables", "engram0.key_proj", "contrastive_head.proj", ""}) {
    const uint32_t b = s->BitsFor(name);
    CACT_FUZZ_CHECK(b == 2 || b == 3 || b == 4 || b == 5, "record width");
  }
  return 0;
}
