#include "train/finetune_data.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/text/chat_template.h"
#include "engine/text/python_json.h"
#include "lib/file_bytes.h"
#include "lib/status.h"
#include "train/finetune_example.h"

namespace cact::train {
namespace {

constexpr size_t kMaxSkippedLines = 100;

// The next line of `text` from `*pos`, split as Python's universal newlines do.
std::string_view NextLine(std::string_view text, size_t* pos) {
  const size_t begin = *pos;
  size_t end = text.find_first_of("\r\n", begin);
  if (end == std::string_view::npos) end = text.size();
  *pos = end + (end < text.size() ? 1 : 0);
  if (end < text.size() && text[end] == '\r' && *pos < text.size() && text[*pos] == '\n') ++*pos;
  return text.substr(begin, end - begin);
}

}  // namespace

absl::StatusOr<FinetuneSet> ParseFinetuneJsonl(std::string_view text, const std::string& name) {
  if (text.size() > kMaxFinetuneFile)
    return FileError(name, absl::StrCat("is ", text.size(), " bytes, more than the ",
                                        kMaxFinetuneFile, " a fine-tuning file may have"));
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":1: starts with a UTF-8 byte-order mark (save the file without it)"));
  FinetuneSet set;
  size_t pos = 0;
  for (size_t line_no = 1; pos < text.size(); ++line_no) {
    const std::string_view raw = NextLine(text, &pos);
    const std::string where = absl::StrCat(name, ":", line_no);
    if (raw.size() > kMaxFinetuneLine)
      return absl::InvalidArgumentError(absl::StrCat(where, ": the line is ", raw.size(),
                                                     " bytes long, more than the ",
                                                     kMaxFinetuneLine, " allowed"));
    const std::string_view line = PyStrip(raw);
    if (line.empty()) continue;
    absl::StatusOr<nlohmann::ordered_json> json = ParseJsonForPython(line);
    if (!json.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": malformed JSON: ", json.status().message()));
    CACT_ASSIGN_OR_RETURN(std::optional<FinetuneExample> ex, ExampleFromJson(*json, where));
    if (!ex) {
      if (set.skipped_lines.size() < kMaxSkippedLines) set.skipped_lines.push_back(line_no);
      ++set.skipped;
      continue;
    }
    ex->line = line_no;
    set.examples.push_back(*std::move(ex));
  }
  return set;
}

absl::StatusOr<FinetuneSet> ReadFinetuneJsonl(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path, kMaxFinetuneFile));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return ParseFinetuneJsonl(text, path);
}

RenderedExample RenderExample(const FinetuneExample& example, ChatTemplate t) {
  // Printed JSON was kept in the ensure_ascii=False form; a verbatim string is never escaped.
  const auto json_for = [t](const std::string& json, bool verbatim) {
    return ChatTemplateEnsuresAscii(t) && !verbatim ? PythonJsonEnsureAscii(json) : json;
  };
  RenderedExample r;
  r.prompt = RenderChatText(json_for(example.tools_json, example.tools_verbatim), example.query,
                            example.system, t);
  if (t == ChatTemplate::kV2_0_9) {
    absl::StrAppend(&r.target, "<think>", example.reasoning, "</think>\n");
  } else if (const std::string_view reasoning = PyStrip(example.reasoning); !reasoning.empty()) {
    ((r.target = "<think>\n") += reasoning) += "\n</think>\n";
  }
  absl::StrAppend(&r.target, "<tool_call>",
                  json_for(example.answers_json, example.answers_verbatim),
                  "</tool_call><|im_end|>");
  return r;
}

EncodedExample EncodeExample(const Tokenizer& tokenizer, const FinetuneExample& example,
                             size_t max_len, ChatTemplate t) {
  const RenderedExample r = RenderExample(example, t);
  const std::vector<int32_t> prompt = tokenizer.Encode(r.prompt);
  const std::vector<int32_t> target = tokenizer.Encode(r.target);
  EncodedExample e;
  e.ids.reserve(prompt.size() + target.size() + 2);
  e.ids.push_back(tokenizer.bos_id());
  e.ids.insert(e.ids.end(), prompt.begin(), prompt.end());
  e.ids.insert(e.ids.end(), target.begin(), target.end());
  e.ids.push_back(tokenizer.eos_id());
  e.loss_mask.assign(1 + prompt.size(), 0.0f);
  e.loss_mask.resize(e.ids.size(), 1.0f);
  // Cut, then pad: a cut example keeps its first max_len tokens (and loses EOS).
  e.ids.resize(max_len, tokenizer.pad_id());
  e.loss_mask.resize(max_len, 0.0f);
  return e;
}

size_t EncodedLength(const Tokenizer& tokenizer, const FinetuneExample& example, ChatTemplate t) {
  const RenderedExample r = RenderExample(example, t);
  return tokenizer.Encode(r.prompt).size() + tokenizer.Encode(r.target).size() + 2;
}

size_t FitMaxLen(const Tokenizer& tokenizer, const std::vector<FinetuneExample>& examples,
                 size_t cap, ChatTemplate t) {
  size_t longest = 0;
  for (const FinetuneExample& ex : examples)
    longest = std::max(longest, EncodedLength(tokenizer, ex, t));
  size_t bucket = 128;
  while (bucket < std::min(longest, cap)) bucket *= 2;
  return std::min(bucket, cap);
}

}  // namespace cact::train
