// The fine-tuning JSONL reader over arbitrary bytes. An accepted file's examples render and
// encode at any length to exactly max_len ids in the vocabulary with a 0/1 mask, and JSON
// printed the Python way reads back to the same text (floats round-trip).
#include <cstdint>
#include <string>

#include "engine/text/python_json.h"
#include "fuzz_common.h"
#include "quant/synthetic.h"
#include "train/finetune_data.h"

using namespace cact;

namespace {

const Tokenizer& SmallTokenizer() {
  static const Tokenizer* tok = [] {
    auto blob = SyntheticTokenizer(*FindSyntheticPreset("small"));
    CACT_FUZZ_CHECK(blob.ok(), "the small tokenizer loads");
    auto t = Tokenizer::FromBlob(*std::move(blob));
    CACT_FUZZ_CHECK(t.ok(), "the small tokenizer parses");
    return new Tokenizer(*std::move(t));
  }();
  return *tok;
}

void CheckFixedPoint(const std::string& json_text) {
  auto parsed = ParseJsonForPython(json_text);
  if (!parsed.ok()) return;  // a string-valued field is taken verbatim, JSON or not
  const std::string once = PythonJsonDumps(*parsed);
  auto again = ParseJsonForPython(once);
  CACT_FUZZ_CHECK(again.ok(), "printed JSON parses");
  CACT_FUZZ_CHECK(PythonJsonDumps(*again) == once, "printed JSON is a fixed point");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::SingleThreaded();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto set = train::ParseFinetuneJsonl(text, "fuzz.jsonl");
  if (!set.ok()) {
    CACT_FUZZ_CHECK(set.status().message().rfind("fuzz.jsonl", 0) == 0, "error names the file");
    return 0;
  }
  CACT_FUZZ_CHECK(set->skipped_lines.size() <= set->skipped, "skipped lines counted");
  const Tokenizer& tok = SmallTokenizer();
  for (const train::FinetuneExample& ex : set->examples) {
    CACT_FUZZ_CHECK(ex.line >= 1, "line numbers start at 1");
    const train::RenderedExample r = train::RenderExample(ex);
    CACT_FUZZ_CHECK(r.prompt.find(ex.query) != std::string::npos, "prompt holds the query");
    CACT_FUZZ_CHECK(r.target.find(ex.answers_json) != std::string::npos, "target holds answers");
    CheckFixedPoint(ex.tools_json);
    CheckFixedPoint(ex.answers_json);
    const size_t full = train::EncodedLength(tok, ex);
    for (size_t max_len : {size_t(8), full, full + 3}) {
      const train::EncodedExample e = train::EncodeExample(tok, ex, max_len);
      CACT_FUZZ_CHECK(e.ids.size() == max_len && e.loss_mask.size() == max_len, "padded size");
      for (size_t i = 0; i < max_len; ++i) {
        CACT_FUZZ_CHECK(e.ids[i] >= 0 && e.ids[i] < tok.vocab_size(), "id in vocab");
        CACT_FUZZ_CHECK(e.loss_mask[i] == 0.0f || e.loss_mask[i] == 1.0f, "mask is 0 or 1");
      }
      CACT_FUZZ_CHECK(max_len == 0 || e.ids[0] == tok.bos_id(), "BOS first");
      CACT_FUZZ_CHECK(max_len < full || e.ids[full - 1] == tok.eos_id(), "EOS last");
    }
  }
  return 0;
}
