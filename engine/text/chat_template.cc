#include "engine/text/chat_template.h"

#include <algorithm>
#include <array>

#include "engine/text/python_json.h"

namespace cact {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kToolsStart = "<tools>";
constexpr std::string_view kToolsEnd = "</tools>";

struct NamedTemplate {
  ChatTemplate t;
  std::string_view name;
};
constexpr std::array<NamedTemplate, 2> kTemplates = {{
    {ChatTemplate::kV2_0_12, "v2.0.12"},
    {ChatTemplate::kV2_0_9, "v2.0.9"},
}};

// Python's str.isspace() over the code points that have it (none past U+3000).
bool IsSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// The code point of the well-formed UTF-8 sequence `s` (1 to 3 bytes, shortest form), or -1.
int64_t CodePoint(std::string_view s) {
  const auto b = [&](size_t i) { return uint32_t(uint8_t(s[i])); };
  for (size_t i = 1; i < s.size(); ++i)
    if ((b(i) & 0xC0) != 0x80) return -1;
  if (s.size() == 1 && b(0) < 0x80) return b(0);
  if (s.size() == 2 && (b(0) & 0xE0) == 0xC0) {
    const uint32_t c = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    return c >= 0x80 ? c : -1;
  }
  if (s.size() == 3 && (b(0) & 0xF0) == 0xE0) {
    const uint32_t c = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return c >= 0x800 ? c : -1;
  }
  return -1;  // 4-byte characters are never whitespace
}

size_t CharLength(uint8_t lead) {
  return lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : 4;
}

// The system text the template renders: v2.0.12 strips it, v2.0.9 takes it as given.
std::string_view SystemText(std::optional<std::string_view> system, ChatTemplate t) {
  if (!system) return {};
  return t == ChatTemplate::kV2_0_12 ? PythonStrip(*system) : *system;
}

// Everything up to and including </tools>: the part pinned as the KV sink.
std::string ToolsPrefix(std::string_view tools_json, std::optional<std::string_view> system,
                        ChatTemplate t) {
  std::string out;
  const std::string_view sys = SystemText(system, t);
  if (!sys.empty()) ((((out += kImStart) += "system\n") += sys) += kImEnd) += "\n";
  ((((out += kImStart) += "user\n") += kToolsStart) += tools_json) += kToolsEnd;
  return out;
}

// What follows the tools prefix: the query and the assistant turn's opening.
void AppendQueryTurn(std::string_view query, std::string* out) {
  ((((((*out += "\n") += query) += kImEnd) += "\n") += kImStart) += "assistant\n");
}

}  // namespace

std::string_view ChatTemplateName(ChatTemplate t) {
  for (const NamedTemplate& n : kTemplates)
    if (n.t == t) return n.name;
  return "unknown";
}

std::string ChatTemplateNames() {
  std::string out;
  for (const NamedTemplate& n : kTemplates) (out += out.empty() ? "" : ", ") += n.name;
  return out;
}

absl::StatusOr<ChatTemplate> ParseChatTemplate(std::string_view name) {
  for (const NamedTemplate& n : kTemplates)
    if (n.name == name) return n.t;
  return absl::InvalidArgumentError("unknown chat template \"" + std::string(name) +
                                    "\" (accepted: " + ChatTemplateNames() + ")");
}

bool ChatTemplateEnsuresAscii(ChatTemplate t) { return t == ChatTemplate::kV2_0_9; }

std::string_view PythonStrip(std::string_view s) {
  while (!s.empty()) {
    const size_t n = std::min(CharLength(uint8_t(s[0])), s.size());
    const int64_t c = CodePoint(s.substr(0, n));
    if (c < 0 || !IsSpace(uint32_t(c))) break;
    s.remove_prefix(n);
  }
  while (!s.empty()) {
    size_t n = 1;  // back over continuation bytes to the lead byte
    while (n < s.size() && n < 4 && (uint8_t(s[s.size() - n]) & 0xC0) == 0x80) ++n;
    const int64_t c = CodePoint(s.substr(s.size() - n));
    if (c < 0 || !IsSpace(uint32_t(c))) break;
    s.remove_suffix(n);
  }
  return s;
}

absl::StatusOr<std::string> CompactToolsJson(std::string_view json_text, ChatTemplate t) {
  absl::StatusOr<nlohmann::ordered_json> j = ParseJsonForPython(json_text);
  if (!j.ok())
    return absl::InvalidArgumentError("tools JSON is malformed: " +
                                      std::string(j.status().message()));
  if (!j->is_array())
    return absl::InvalidArgumentError(
        std::string("tools JSON must be an array of tool declarations, found ") + j->type_name());
  return PythonJsonDumps(*j, ChatTemplateEnsuresAscii(t));
}

std::string RenderChatText(std::string_view tools_json, std::string_view query,
                           std::optional<std::string_view> system, ChatTemplate t) {
  std::string out = ToolsPrefix(tools_json, system, t);
  AppendQueryTurn(query, &out);
  return out;
}

absl::StatusOr<ChatPrompt> BuildChatPrompt(const Tokenizer& tokenizer, std::string_view tools_json,
                                           std::string_view query,
                                           std::optional<std::string_view> system, ChatTemplate t) {
  auto compact = CompactToolsJson(tools_json, t);
  if (!compact.ok()) return compact.status();
  return EncodeChatPrompt(tokenizer, *compact, query, system, t);
}

absl::StatusOr<ChatPrompt> EncodeChatPrompt(const Tokenizer& tokenizer,
                                            std::string_view compact_tools, std::string_view query,
                                            std::optional<std::string_view> system,
                                            ChatTemplate t) {
  std::string ascii_tools;
  if (ChatTemplateEnsuresAscii(t)) {
    ascii_tools = PythonJsonEnsureAscii(compact_tools);
    compact_tools = ascii_tools;
  }
  ChatPrompt p;
  p.text = ToolsPrefix(compact_tools, system, t);
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
