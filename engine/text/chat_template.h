// The Needle prompt template (spec section 2, "Prompt template"; official
// finetune.render_example): BOS, then
//   [<|im_start|>system\n{system}<|im_end|>\n]<|im_start|>user\n<tools>{tools}</tools>\n
//   {query}<|im_end|>\n<|im_start|>assistant\n
// encoded as one string. {tools} is compact JSON (separators "," and ":", non-ASCII kept,
// key order kept); the system turn is omitted when the stripped system text is empty.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/tokenizer.h"

namespace cact {

struct ChatPrompt {
  std::string text;           // the rendered template (without BOS)
  std::vector<int32_t> ids;   // BOS + Encode(text)
  uint32_t tools_prefix = 0;  // tokens from BOS through </tools>: the default KV sink
};

// Parses a tools declaration (a JSON array) and re-serialises it the way the official
// renderer does. Malformed JSON or a non-array is an InvalidArgument error naming the spot.
absl::StatusOr<std::string> CompactToolsJson(std::string_view json_text);

// Renders the template text from an already compact tools string.
std::string RenderChatText(std::string_view tools_json, std::string_view query,
                           std::optional<std::string_view> system = std::nullopt);

// Renders and tokenizes tools already in the compact form (CompactToolsJson's result, or
// PythonJsonDumps of parsed declarations).
absl::StatusOr<ChatPrompt> EncodeChatPrompt(const Tokenizer& tokenizer,
                                            std::string_view compact_tools, std::string_view query,
                                            std::optional<std::string_view> system = std::nullopt);

// Renders and tokenizes; `tools_json` is raw user JSON (compacted here).
absl::StatusOr<ChatPrompt> BuildChatPrompt(const Tokenizer& tokenizer, std::string_view tools_json,
                                           std::string_view query,
                                           std::optional<std::string_view> system = std::nullopt);

}  // namespace cact
