// Tokenizer blob parser over arbitrary bytes. An accepted blob must serialize back to the
// same bytes, and a Tokenizer built from it must encode and decode without going out of
// bounds (ids inside the vocabulary).
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/text/tokenizer.h"
#include "formats/tokenizer_blob.h"
#include "fuzz_common.h"

using namespace cact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto blob = ParseTokenizerBlob({data, size}, "fuzz.tok", 64);
  if (!blob.ok()) {
    const std::string msg(blob.status().message());
    CACT_FUZZ_CHECK(msg.rfind("fuzz.tok: ", 0) == 0, "error names the file");
    return 0;
  }
  const std::vector<uint8_t> again = SerializeTokenizerBlob(*blob);
  CACT_FUZZ_CHECK(again.size() == size && std::equal(again.begin(), again.end(), data),
                  "parse then serialize is byte-identical");
  auto tok = Tokenizer::FromBlob(std::move(*blob));
  if (!tok.ok()) return 0;
  for (const char* text : {"", " ", "a", "  ab  ba ", "<|im_start|>user\n<tools>x</tools>",
                           "caf\xC3\xA9 \xF0\x9F\x98\x80 \xFF\xFE", "\xE2\x96\x81\xE2\x96\x81"}) {
    const std::vector<int32_t> ids = tok->Encode(text);
    for (int32_t id : ids)
      CACT_FUZZ_CHECK(id >= 0 && id < tok->vocab_size(), "encoded id in vocab");
    tok->Decode(ids);
    tok->EncodeAsPieces(text);
  }
  return 0;
}
