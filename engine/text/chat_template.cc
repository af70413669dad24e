#include "engine/text/chat_template.h"

#include "engine/text/python_json.h"

namespace cact {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kToolsStart = "<tools>";
constexpr std::string_view kToolsEnd = "</tools>";

// Python's str.strip() for the whitespace a system prompt realistically carries.
std::string_view Strip(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Everything up to and including </tools>: the part pinned as the KV sink.
std::string ToolsPrefix(std::string_view tools_json, std::optional<std::string_view> system) {
  std::string out;
  const std::string_view sys = system ? Strip(*system) : std::string_view();
  if (!sys.empty()) ((((out += kImStart) += "system\n") += sys) += kImEnd) += "\n";
  ((((out += kImStart) += "user\n") += kToolsStart) += tools_json) += kToolsEnd;
  return out;
}

// What follows the tools prefix: the query and the assistant turn's opening.
void AppendQueryTurn(std::string_view query, std::string* out) {
  ((((((*out += "\n") += query) += kImEnd) += "\n") += kImStart) += "assistant\n");
}

}  // namespace

absl::StatusOr<std::string> CompactToolsJson(std::string_view json_text) {
  absl::StatusOr<nlohmann::ordered_json> j = ParseJsonForPython(json_text);
  if (!j.ok())
    return absl::InvalidArgumentError("tools JSON is malformed: " +
                                      std::string(j.status().message()));
  if (!j->is_array())
    return absl::InvalidArgumentError(
        std::string("tools JSON must be an array of tool declarations, found ") + j->type_name());
  return PythonJsonDumps(*j);
}

std::string RenderChatText(std::string_view tools_json, std::string_view query,
                           std::optional<std::string_view> system) {
  std::string out = ToolsPrefix(tools_json, system);
  AppendQueryTurn(query, &out);
  return out;
}

absl::StatusOr<ChatPrompt> BuildChatPrompt(const Tokenizer& tokenizer, std::string_view tools_json,
                                           std::string_view query,
                                           std::optional<std::string_view> system) {
  auto compact = CompactToolsJson(tools_json);
  if (!compact.ok()) return compact.status();
  return EncodeChatPrompt(tokenizer, *compact, query, system);
}

absl::StatusOr<ChatPrompt> EncodeChatPrompt(const Tokenizer& tokenizer,
                                            std::string_view compact_tools, std::string_view query,
                                            std::optional<std::string_view> system) {
  ChatPrompt p;
  p.text = ToolsPrefix(compact_tools, system);
  const size_t prefix_size = p.text.size();
  AppendQueryTurn(query, &p.text);
  std::optional<size_t> prefix_ids;
  const std::vector<int32_t> ids = tokenizer.Encode(p.text, prefix_size, &prefix_ids);
  // </tools> is a user-defined piece, so no merge crosses it and a token ends with it.
  if (!prefix_ids)
    return absl::InternalError("chat template: no token ends where the tools prefix does");
  p.ids.push_back(tokenizer.bos_id());
  p.ids.insert(p.ids.end(), ids.begin(), ids.end());
  p.tools_prefix = uint32_t(*prefix_ids + 1);
  return p;
}

}  // namespace cact
