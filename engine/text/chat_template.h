// The Needle prompt template (spec section 2, "Prompt template"; official
// finetune.render_example): BOS, then
//   [<|im_start|>system\n{system}<|im_end|>\n]<|im_start|>user\n<tools>{tools}</tools>\n
//   {query}<|im_end|>\n<|im_start|>assistant\n
// encoded as one string. {tools} is compact JSON (separators "," and ":", key order kept).
// Two releases of the official renderer differ (docs/tool-calls.md, "The format"):
//  - v2.0.12 (the default; what the official package renders today): non-ASCII kept
//    (ensure_ascii=False); the system text stripped as str.strip() does, its turn omitted
//    when that leaves nothing;
//  - v2.0.9: non-ASCII escaped as \uxxxx (json.dumps' default ensure_ascii=True); the system
//    text as given, its turn omitted only when it is empty.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/tokenizer.h"

namespace cact {

enum class ChatTemplate { kV2_0_12, kV2_0_9 };
inline constexpr ChatTemplate kDefaultChatTemplate = ChatTemplate::kV2_0_12;

// "v2.0.12" or "v2.0.9".
std::string_view ChatTemplateName(ChatTemplate t);
// The accepted names, comma-separated, the default first: "v2.0.12, v2.0.9".
std::string ChatTemplateNames();
// A name as ChatTemplateName writes it; anything else is InvalidArgument listing the names.
absl::StatusOr<ChatTemplate> ParseChatTemplate(std::string_view name);
// Whether the template prints its JSON (tools, answers) with ensure_ascii=True.
bool ChatTemplateEnsuresAscii(ChatTemplate t);

// Python's str.strip(): the characters str.isspace() accepts (ASCII and Unicode
// whitespace) off both ends; bytes that are not well-formed UTF-8 stop the strip.
std::string_view PythonStrip(std::string_view s);

struct ChatPrompt {
  std::string text;           // the rendered template (without BOS)
  std::vector<int32_t> ids;   // BOS + Encode(text)
  uint32_t tools_prefix = 0;  // tokens from BOS through </tools>: the default KV sink
};

// Parses a tools declaration (a JSON array) and re-serialises it the way the template's
// renderer does. Malformed JSON or a non-array is an InvalidArgument error naming the spot.
absl::StatusOr<std::string> CompactToolsJson(std::string_view json_text,
                                             ChatTemplate t = kDefaultChatTemplate);

// Renders the template text; `tools_json` is inserted as given (already in the template's
// form, or a string the caller takes verbatim, as the official renderer does with a str).
std::string RenderChatText(std::string_view tools_json, std::string_view query,
                           std::optional<std::string_view> system = std::nullopt,
                           ChatTemplate t = kDefaultChatTemplate);

// Renders and tokenizes tools in the compact form (CompactToolsJson's result, or
// PythonJsonDumps of parsed declarations, either ensure_ascii mode: v2.0.9 escapes them here).
absl::StatusOr<ChatPrompt> EncodeChatPrompt(const Tokenizer& tokenizer,
                                            std::string_view compact_tools, std::string_view query,
                                            std::optional<std::string_view> system = std::nullopt,
                                            ChatTemplate t = kDefaultChatTemplate);

// Renders and tokenizes; `tools_json` is raw user JSON (compacted here).
absl::StatusOr<ChatPrompt> BuildChatPrompt(const Tokenizer& tokenizer, std::string_view tools_json,
                                           std::string_view query,
                                           std::optional<std::string_view> system = std::nullopt,
                                           ChatTemplate t = kDefaultChatTemplate);

}  // namespace cact
