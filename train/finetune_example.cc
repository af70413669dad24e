#include "train/finetune_example.h"

#include "absl/strings/str_cat.h"
#include "engine/text/chat_template.h"
#include "engine/text/python_json.h"
#include "lib/status.h"

namespace cact::train {
namespace {

using Json = nlohmann::ordered_json;

absl::Status FieldError(const std::string& where, std::string_view field, std::string_view what) {
  // absl::StrCat takes no std::string_view in Debian's Abseil.
  return absl::InvalidArgumentError(where + ": \"" + std::string(field) + "\" " +
                                    std::string(what));
}

// Python's truth value of a JSON value (None, False, 0, "", [], {} are false).
bool Truthy(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return v.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return v.get<double>() != 0;
    case Json::value_t::string:
    case Json::value_t::array:
    case Json::value_t::object:
      return !v.empty();
    default:
      return true;
  }
}

// `(x or "")` where the result is used as a str: falsy values are "", truthy ones must be
// strings (the official code raises on anything else).
absl::StatusOr<std::string> OptionalText(const Json& v, const std::string& where,
                                         std::string_view field) {
  if (!Truthy(v)) return std::string();
  if (!v.is_string()) return FieldError(where, field, "must be a string or null");
  return v.get<std::string>();
}

// tools / answers: a string is taken verbatim (`*verbatim`), an array is printed as
// json.dumps prints it with ensure_ascii=False (RenderExample escapes it for v2.0.9).
absl::StatusOr<std::string> CompactField(const Json& v, const std::string& where,
                                         std::string_view field, bool* verbatim) {
  *verbatim = v.is_string();
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return FieldError(where, field, "must be an array or a string");
  return PythonJsonDumps(v);
}

const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// {"name": ..., "arguments": ...} of one assistant tool call (from_chat).
absl::StatusOr<Json> ChatCall(const Json& call, const std::string& where,
                              const std::string& field) {
  if (!call.is_object()) return FieldError(where, field, "must be an object");
  const Json* fn = Find(call, "function");
  const Json& function = fn && Truthy(*fn) ? *fn : call;
  if (!function.is_object()) return FieldError(where, field + ".function", "must be an object");
  Json arguments = Json::object();
  if (const Json* a = Find(function, "arguments")) arguments = *a;
  if (arguments.is_string()) {
    const std::string text = arguments.get<std::string>();
    arguments = Json::object();
    if (!PyStrip(text).empty()) {
      absl::StatusOr<Json> parsed = ParseJsonForPython(text);
      if (!parsed.ok())
        return FieldError(where, field + ".function.arguments",
                          absl::StrCat("is not valid JSON: ", parsed.status().message()));
      arguments = *std::move(parsed);
    }
  }
  Json out = Json::object();
  const Json* name = Find(function, "name");
  out["name"] = name ? *name : Json(nullptr);
  out["arguments"] = std::move(arguments);
  return out;
}

// from_chat: one user turn answered by one assistant turn (+ system turns), else nullopt.
absl::StatusOr<std::optional<FinetuneExample>> FromChat(const Json& line, const Json& messages,
                                                        const std::string& where) {
  std::vector<const Json*> turns;
  const Json* system = nullptr;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object())
      return FieldError(where, absl::StrCat("messages[", i, "]"), "must be an object");
    const Json* role = Find(m, "role");
    if (role && *role == "system") {
      if (!system) system = &m;
    } else {
      turns.push_back(&m);
    }
  }
  auto role_is = [](const Json* m, const char* r) {
    const Json* role = Find(*m, "role");
    return role && *role == r;
  };
  if (turns.size() != 2 || !role_is(turns[0], "user") || !role_is(turns[1], "assistant"))
    return std::nullopt;

  FinetuneExample ex;
  const Json* content = Find(*turns[0], "content");
  CACT_ASSIGN_OR_RETURN(ex.query,
                        OptionalText(content ? *content : Json(), where, "messages[user].content"));
  Json answers = Json::array();
  if (const Json* calls = Find(*turns[1], "tool_calls"); calls && Truthy(*calls)) {
    if (!calls->is_array())
      return FieldError(where, "messages[assistant].tool_calls", "must be an array or null");
    for (size_t j = 0; j < calls->size(); ++j) {
      CACT_ASSIGN_OR_RETURN(
          Json c,
          ChatCall((*calls)[j], where, absl::StrCat("messages[assistant].tool_calls[", j, "]")));
      answers.push_back(std::move(c));
    }
  }
  ex.answers_json = PythonJsonDumps(answers);
  Json tools = Json::array();
  if (const Json* t = Find(line, "tools"); t && Truthy(*t)) {
    if (!t->is_array()) return FieldError(where, "tools", "must be an array or null");
    for (const Json& tool : *t) {
      const Json* fn = tool.is_object() ? Find(tool, "function") : nullptr;
      tools.push_back(fn ? *fn : tool);
    }
  }
  ex.tools_json = PythonJsonDumps(tools);
  if (system) {
    const Json* sc = Find(*system, "content");
    CACT_ASSIGN_OR_RETURN(ex.system,
                          OptionalText(sc ? *sc : Json(), where, "messages[system].content"));
  }
  return ex;
}

}  // namespace

std::string_view PyStrip(std::string_view s) { return PythonStrip(s); }

absl::StatusOr<std::optional<FinetuneExample>> ExampleFromJson(const Json& line,
                                                               const std::string& where) {
  if (!line.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a line must be a JSON object, found ", line.type_name()));
  const Json* query = Find(line, "query");
  if (!query) {
    const Json* messages = Find(line, "messages");
    if (!messages || !messages->is_array()) return std::nullopt;
    return FromChat(line, *messages, where);
  }
  if (!query->is_string()) return FieldError(where, "query", "must be a string");
  FinetuneExample ex;
  ex.query = query->get<std::string>();
  if (const Json* t = Find(line, "tools")) {
    CACT_ASSIGN_OR_RETURN(ex.tools_json, CompactField(*t, where, "tools", &ex.tools_verbatim));
  } else {
    ex.tools_json = "[]";
  }
  const char* answers_key = Find(line, "answers")          ? "answers"
                            : Find(line, "function_calls") ? "function_calls"
                                                           : nullptr;
  if (answers_key) {
    CACT_ASSIGN_OR_RETURN(
        ex.answers_json, CompactField(line[answers_key], where, answers_key, &ex.answers_verbatim));
  } else {
    ex.answers_json = "[]";
  }
  if (const Json* r = Find(line, "reasoning")) {
    CACT_ASSIGN_OR_RETURN(ex.reasoning, OptionalText(*r, where, "reasoning"));
  }
  if (const Json* s = Find(line, "system")) {
    CACT_ASSIGN_OR_RETURN(ex.system, OptionalText(*s, where, "system"));
  }
  return ex;
}

}  // namespace cact::train
