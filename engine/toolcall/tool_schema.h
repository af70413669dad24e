// Tool declarations and the subset of JSON Schema the tool-call grammar enforces.
//
// A tools file is a JSON array of {"name", "description"?, "parameters"?} declarations, or
// OpenAI-wrapped {"type": "function", "function": {...}}. `parameters` is an object schema.
// Enforced: type (one name or a list: a union), properties, required, items, minItems,
// maxItems, minLength, maxLength (code points), enum, const; no type and no enum/const is
// any JSON value. Accepted and ignored: annotations (description, title, default, examples,
// format, $schema, $id, $comment, deprecated, readOnly, writeOnly), additionalProperties
// (the grammar never writes undeclared keys), numeric bounds (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf: a prefix grammar cannot bound a number
// cheaply) and unknown keywords. Refused, naming the tool and keyword: references and
// combinators ($ref, oneOf, anyOf, allOf, not, if/then/else), pattern, patternProperties,
// and the other constraints a token mask cannot express (see kRefusedKeywords).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace cact {

struct SchemaNode {
  enum Kind : uint8_t { kAny, kObject, kArray, kString, kInteger, kNumber, kBoolean, kNull, kEnum };
  Kind kind = kAny;
  // kObject: declared properties in declaration order; the grammar tracks them in 64 bits.
  struct Property {
    std::string name;
    int node = -1;
    bool required = false;
  };
  std::vector<Property> properties;
  // kArray: items (-1: any value) and the item count bounds.
  int items = -1;
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // kString: code point bounds.
  uint32_t min_length = 0, max_length = UINT32_MAX;
  // kEnum: the allowed values as compact JSON (const is a one-value enum).
  std::vector<std::string> values;
  // A union (type list): one node per type name, each a different kind. Empty otherwise;
  // `kind` is then unused.
  std::vector<int> members;
};

inline constexpr size_t kMaxObjectProperties = 64;

struct ToolSpec {
  std::string name;
  std::string description;
  int arguments = -1;  // node of the parameters object schema
};

struct ToolCatalog {
  std::vector<ToolSpec> tools;
  std::vector<SchemaNode> nodes;
  // Each declaration as given (wrapped or not): the prompt shows the user's own JSON.
  std::vector<nlohmann::ordered_json> declarations;
};

// Parses a tools file's text. Errors are InvalidArgument and name the file, the tool
// (index and name) and the keyword with its schema path, e.g.
//   tools.json: tool 2 "find": parameters.properties.q: keyword "pattern" is not supported ...
absl::StatusOr<ToolCatalog> ParseToolCatalog(std::string_view json_text, std::string_view file);

// The catalogue of the tools at `kept` (in that order) with the schema nodes they use,
// renumbered in their first order (children still come before their parents).
ToolCatalog KeepTools(const ToolCatalog& catalog, std::span<const size_t> kept);

}  // namespace cact
