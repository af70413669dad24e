// Fine-tuning examples for `cact-torch finetune`, read and rendered exactly as the official
// needle/model/finetune.py does (read_examples, from_chat, render_example, _encode,
// fit_max_len), so a JSONL file trains on the same token ids here as there. Rendering follows
// one of two releases of render_example (ChatTemplate, engine/text/chat_template.h):
//  - v2.0.12 (the default): tools/answers as json.dumps(..., ensure_ascii=False); reasoning
//    and system stripped (str.strip()); the system turn only when non-empty; the think block
//    "<think>\n{reasoning}\n</think>\n" only when reasoning is non-empty;
//  - v2.0.9: tools/answers with ensure_ascii=True (non-ASCII as \uxxxx); reasoning and system
//    as given; the system turn when the text is non-empty; the think block always, as
//    "<think>{reasoning}</think>\n". A null (or other false) reasoning, on which v2.0.9
//    raises TypeError, renders as an absent one does: "<think></think>\n".
//  A string "tools"/"answers" is inserted verbatim by both.
//
// Reading (one JSON object a line; lines split at \n, \r\n or \r as Python's text mode does,
// stripped as str.strip() does, blank lines ignored):
//  - a line with "query" is an example; a line without it but with a "messages" list is
//    chat form (one user turn answered by one assistant turn, optional system turn first);
//  - a chat line of any other shape, or a line with neither, is skipped and counted, as
//    the official reader skips it;
//  - malformed JSON, a non-object line and a field of the wrong type are errors naming
//    `file:line` and the field (the official reader raises on all of these too, though for
//    "tools"/"answers" it would json.dumps any value: here they must be an array or a string,
//    and "reasoning"/"system" must be a string or null).
//  Deliberate limits: a line of at most kMaxFinetuneLine bytes, a file of at most
//  kMaxFinetuneFile bytes; integers beyond 64 bits, NaN/Infinity and nesting deeper than 500
//  are errors (Python would accept them); a UTF-8 byte-order mark is an error, as in Python.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"

namespace cact::train {

inline constexpr size_t kMaxFinetuneLine = size_t{16} << 20;  // 16 MiB
inline constexpr size_t kMaxFinetuneFile = size_t{4} << 30;   // 4 GiB

struct FinetuneExample {
  std::string query;
  std::string tools_json;    // compact JSON as json.dumps(separators=(",",":"),
  std::string answers_json;  // ensure_ascii=False) prints it; a string value verbatim
  std::string reasoning;     // as given (v2.0.12 strips it when rendering)
  std::string system;        // as given (v2.0.12 strips it when rendering)
  size_t line = 0;           // 1-based line in the file
  // The line gave a string: inserted as is by every template (v2.0.9 escapes printed JSON).
  bool tools_verbatim = false, answers_verbatim = false;
};

struct FinetuneSet {
  std::vector<FinetuneExample> examples;
  size_t skipped = 0;                 // lines neither query/answers nor single-turn chat
  std::vector<size_t> skipped_lines;  // their line numbers (the first 100)
};

absl::StatusOr<FinetuneSet> ReadFinetuneJsonl(const std::string& path);
// The same over text in memory; `name` stands for the file in messages.
absl::StatusOr<FinetuneSet> ParseFinetuneJsonl(std::string_view text, const std::string& name);

struct RenderedExample {
  std::string prompt;  // [system turn] user turn with <tools>, then "<|im_start|>assistant\n"
  std::string target;  // [think block]<tool_call>{answers}</tool_call><|im_end|>
};
RenderedExample RenderExample(const FinetuneExample& example,
                              ChatTemplate t = kDefaultChatTemplate);

struct EncodedExample {
  std::vector<int32_t> ids;      // BOS + Encode(prompt) + Encode(target) + EOS, cut and padded
  std::vector<float> loss_mask;  // 0 over BOS and the prompt, 1 over the target and EOS
};
// Each part is encoded on its own (each with SentencePiece's dummy prefix, as the official
// tokenizer.encode does), then cut to `max_len` and padded with pad ids / 0.
EncodedExample EncodeExample(const Tokenizer& tokenizer, const FinetuneExample& example,
                             size_t max_len, ChatTemplate t = kDefaultChatTemplate);
// Unpadded length of an example: Encode(prompt) + Encode(target) + 2.
size_t EncodedLength(const Tokenizer& tokenizer, const FinetuneExample& example,
                     ChatTemplate t = kDefaultChatTemplate);
// The longest example rounded up to a power of two >= 128, at most `cap` (fit_max_len).
size_t FitMaxLen(const Tokenizer& tokenizer, const std::vector<FinetuneExample>& examples,
                 size_t cap, ChatTemplate t = kDefaultChatTemplate);

}  // namespace cact::train
