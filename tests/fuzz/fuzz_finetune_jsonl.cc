// The fine-tuning JSONL reader over arbitrary bytes. An accepted file's examples render and
// encode, in both chat templates (v2.0.12, v2.0.9), at any length to exactly max_len ids in
// the vocabulary with a 0/1 mask; JSON printed the Python way reads back to the same text
// (floats round-trip), and its ensure_ascii form is ASCII and reads back to the same value.
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
  const std::string ascii = PythonJsonDumps(*parsed, /*ensure_ascii=*/true);
  CACT_FUZZ_CHECK(PythonJsonEnsureAscii(once) == ascii, "ensure_ascii of the text = of the value");
  for (char c : ascii) CACT_FUZZ_CHECK(uint8_t(c) < 0x7F, "ensure_ascii JSON is ASCII");
  auto back = ParseJsonForPython(ascii);
  CACT_FUZZ_CHECK(back.ok() && PythonJsonDumps(*back) == once, "ensure_ascii JSON reads back");
}

// The template's JSON of a field: printed JSON escaped for v2.0.9, a verbatim string as is.
std::string TemplateJson(const std::string& json, bool verbatim, ChatTemplate t) {
  return t == ChatTemplate::kV2_0_9 && !verbatim ? PythonJsonEnsureAscii(json) : json;
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
    CheckFixedPoint(ex.tools_json);
    CheckFixedPoint(ex.answers_json);
    for (ChatTemplate t : {ChatTemplate::kV2_0_12, ChatTemplate::kV2_0_9}) {
      const train::RenderedExample r = train::RenderExample(ex, t);
      CACT_FUZZ_CHECK(r.prompt.find(ex.query) != std::string::npos, "prompt holds the query");
      CACT_FUZZ_CHECK(r.prompt.find("<tools>" + TemplateJson(ex.tools_json, ex.tools_verbatim, t) +
                                    "</tools>") != std::string::npos,
                      "prompt holds the template's tools");
      CACT_FUZZ_CHECK(
          r.target.find(TemplateJson(ex.answers_json, ex.answers_verbatim, t)) != std::string::npos,
          "target holds the template's answers");
      CACT_FUZZ_CHECK(t != ChatTemplate::kV2_0_9 ||
                          r.target.rfind("<think>" + ex.reasoning + "</think>\n", 0) == 0,
                      "v2.0.9 writes the think block, reasoning as given");
      const size_t full = train::EncodedLength(tok, ex, t);
      for (size_t max_len : {size_t(8), full, full + 3}) {
        const train::EncodedExample e = train::EncodeExample(tok, ex, max_len, t);
        CACT_FUZZ_CHECK(e.ids.size() == max_len && e.loss_mask.size() == max_len, "padded size");
        for (size_t i = 0; i < max_len; ++i) {
          CACT_FUZZ_CHECK(e.ids[i] >= 0 && e.ids[i] < tok.vocab_size(), "id in vocab");
          CACT_FUZZ_CHECK(e.loss_mask[i] == 0.0f || e.loss_mask[i] == 1.0f, "mask is 0 or 1");
        }
        CACT_FUZZ_CHECK(max_len == 0 || e.ids[0] == tok.bos_id(), "BOS first");
        CACT_FUZZ_CHECK(max_len < full || e.ids[full - 1] == tok.eos_id(), "EOS last");
      }
    }
  }
  return 0;
}
