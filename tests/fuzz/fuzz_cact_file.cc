// .cact parser and validator over arbitrary bytes. An accepted file must be fully readable
// (every blob, dequantized values, codebooks, tokenizer) and must re-serialize through the
// writer to the same bytes, except for gap bytes between blobs, which the writer zeroes.
#include <cstdint>
#include <vector>

#include "formats/cact/cact_file.h"
#include "formats/cact/generation.h"
#include "formats/cact/writer.h"
#include "fuzz_common.h"
#include "lib/file_bytes.h"

using namespace cact;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = CactFile::FromBytes(
      FileBytes::FromBuffer("fuzz.cact", std::vector<uint8_t>(data, data + size)));
  if (!f.ok()) {
    const std::string msg(f.status().message());
    CACT_FUZZ_CHECK(msg.rfind("fuzz.cact: ", 0) == 0, "error names the file");
    // A Needle 3 tag gets the one refusal line (formats/cact/generation.h), without an offset.
    if (f.status() == Generation3Refusal("fuzz.cact")) return 0;
    CACT_FUZZ_CHECK(msg.find(" at offset ") != std::string::npos, "error names an offset");
    return 0;
  }
  fuzz::TouchCactFile(*f);

  CactContents c;
  c.geometry = f->geometry();
  c.codebook.assign(f->codebook().begin(), f->codebook().end());
  for (const TensorEntry& t : f->tensors()) {
    auto b = f->blob(t);
    c.tensors.push_back({t.name, t.record, std::vector<uint8_t>(b.begin(), b.end())});
  }
  auto again = SerializeCact(c, "fuzz-rewrite.cact");
  CACT_FUZZ_CHECK(again.ok(), "an accepted file re-serializes");
  CACT_FUZZ_CHECK(again->size() == size, "re-serialized size equals the input size");
  for (size_t i = 0; i < size; ++i)
    CACT_FUZZ_CHECK((*again)[i] == data[i] || (*again)[i] == 0,
                    "re-serialized bytes equal the input (gaps aside)");
  return 0;
}
