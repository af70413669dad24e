#include "engine/toolcall/tool_schema.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/text/python_json.h"

namespace cact {
namespace {

using Json = nlohmann::ordered_json;

// Constraints a token mask cannot express (or that change which values are valid in ways
// the grammar would silently ignore): refused rather than relaxed.
constexpr std::array<std::string_view, 20> kRefusedKeywords = {"$ref",
                                                               "oneOf",
                                                               "anyOf",
                                                               "allOf",
                                                               "not",
                                                               "if",
                                                               "then",
                                                               "else",
                                                               "pattern",
                                                               "patternProperties",
                                                               "propertyNames",
                                                               "dependentRequired",
                                                               "dependentSchemas",
                                                               "dependencies",
                                                               "prefixItems",
                                                               "contains",
                                                               "unevaluatedProperties",
                                                               "unevaluatedItems",
                                                               "minProperties",
                                                               "maxProperties"};

SchemaNode OfKind(SchemaNode::Kind kind) {
  SchemaNode n;
  n.kind = kind;
  return n;
}

class CatalogParser {
 public:
  explicit CatalogParser(std::string_view file) : file_(file) {}

  absl::StatusOr<ToolCatalog> Parse(std::string_view text) {
    absl::StatusOr<Json> root = ParseJsonForPython(text);
    if (!root.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ": the tools JSON is malformed: ", root.status().message()));
    if (!root->is_array())
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ": the tools JSON must be an array of tool declarations, found ",
                       root->type_name()));
    absl::flat_hash_set<std::string> names;
    for (size_t i = 0; i < root->size(); ++i) {
      const Json& decl = (*root)[i];
      tool_ = absl::StrCat("tool ", i);
      if (!decl.is_object()) return Error("", "", "a tool declaration must be an object");
      const Json* fn = &decl;
      if (decl.contains("function") && decl["function"].is_object()) fn = &decl["function"];
      if (!fn->contains("name") || !(*fn)["name"].is_string() ||
          (*fn)["name"].get<std::string>().empty())
        return Error("", "name", "a tool needs a non-empty string \"name\"");
      ToolSpec spec;
      spec.name = (*fn)["name"].get<std::string>();
      tool_ = absl::StrCat("tool ", i, " \"", spec.name, "\"");
      if (!names.insert(spec.name).second)
        return Error("", "name", "duplicate tool name: it is declared twice");
      if (fn->contains("description") && (*fn)["description"].is_string())
        spec.description = (*fn)["description"].get<std::string>();
      if (fn->contains("parameters")) {
        const Json& params = (*fn)["parameters"];
        if (!params.is_object()) return Error("parameters", "", "must be a schema object");
        if (params.contains("type") && params["type"] != "object")
          return Error("parameters", "type", "the parameters schema must be of type \"object\"");
        auto node = ParseNode(params, "parameters", /*force_object=*/true);
        if (!node.ok()) return node.status();
        spec.arguments = *node;
      } else {
        catalog_.nodes.push_back(OfKind(SchemaNode::kObject));
        spec.arguments = int(catalog_.nodes.size() - 1);
      }
      catalog_.tools.push_back(std::move(spec));
      catalog_.declarations.push_back(decl);
    }
    return std::move(catalog_);
  }

 private:
  absl::Status Error(std::string_view path, std::string_view keyword, std::string_view what) {
    std::string where = file_ + ": " + tool_;
    if (!path.empty()) where += ": " + std::string(path);
    if (!keyword.empty()) where += ": keyword \"" + std::string(keyword) + "\"";
    return absl::InvalidArgumentError(where + ": " + std::string(what));
  }

  static absl::StatusOr<SchemaNode::Kind> KindOfTypeName(const Json& name) {
    static constexpr std::array<std::pair<std::string_view, SchemaNode::Kind>, 7> kNames = {{
        {"object", SchemaNode::kObject},
        {"array", SchemaNode::kArray},
        {"string", SchemaNode::kString},
        {"integer", SchemaNode::kInteger},
        {"number", SchemaNode::kNumber},
        {"boolean", SchemaNode::kBoolean},
        {"null", SchemaNode::kNull},
    }};
    if (name.is_string())
      for (const auto& [n, k] : kNames)
        if (name.get<std::string>() == n) return k;
    return absl::InvalidArgumentError("unknown");
  }

  absl::StatusOr<uint32_t> Count(const Json& schema, std::string_view path, const char* key,
                                 uint32_t fallback) {
    if (!schema.contains(key)) return fallback;
    const Json& v = schema[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
      return Error(path, key, "must be a non-negative integer");
    return uint32_t(v.get<uint64_t>());
  }

  int Add(SchemaNode node) {
    catalog_.nodes.push_back(std::move(node));
    return int(catalog_.nodes.size() - 1);
  }

  // One schema object -> a node index. `force_object`: the parameters schema, an object
  // even without "type".
  absl::StatusOr<int> ParseNode(const Json& schema, const std::string& path, bool force_object,
                                int depth = 0) {
    if (depth > 64) return Error(path, "", "schemas nest deeper than 64 levels");
    if (!schema.is_object()) return Error(path, "", "a schema must be a JSON object");
    for (std::string_view k : kRefusedKeywords)
      if (schema.contains(k))
        return Error(path, k,
                     "is not supported by the tool-call grammar (it cannot be enforced "
                     "token by token); inline or simplify the schema");
    if (schema.contains("uniqueItems") && schema["uniqueItems"] == true)
      return Error(path, "uniqueItems", "true is not supported by the tool-call grammar");

    if (schema.contains("enum") || schema.contains("const")) {
      SchemaNode node = OfKind(SchemaNode::kEnum);
      if (schema.contains("const")) {
        node.values.push_back(PythonJsonDumps(schema["const"]));
      } else {
        const Json& e = schema["enum"];
        if (!e.is_array() || e.empty()) return Error(path, "enum", "must be a non-empty array");
        for (const Json& v : e) node.values.push_back(PythonJsonDumps(v));
      }
      // Deduplicated and sorted: the grammar narrows candidates as a range of this list.
      std::sort(node.values.begin(), node.values.end());
      node.values.erase(std::unique(node.values.begin(), node.values.end()), node.values.end());
      return Add(std::move(node));
    }

    std::vector<SchemaNode::Kind> kinds;
    if (schema.contains("type")) {
      const Json& t = schema["type"];
      const std::vector<Json> names = t.is_array() ? t.get<std::vector<Json>>() : std::vector{t};
      if (names.empty()) return Error(path, "type", "an empty type list matches nothing");
      for (const Json& n : names) {
        auto kind = KindOfTypeName(n);
        if (!kind.ok())
          return Error(path, "type", absl::StrCat("unknown type ", PythonJsonDumps(n)));
        if (std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) kinds.push_back(*kind);
      }
      // Every integer is a number: the union keeps the wider one (one first byte, one kind).
      if (std::count(kinds.begin(), kinds.end(), SchemaNode::kNumber))
        kinds.erase(std::remove(kinds.begin(), kinds.end(), SchemaNode::kInteger), kinds.end());
    } else if (force_object || schema.contains("properties")) {
      kinds = {SchemaNode::kObject};
    } else {
      return Add(OfKind(SchemaNode::kAny));
    }

    if (kinds.size() > 1) {
      SchemaNode u;
      for (SchemaNode::Kind k : kinds) {
        auto m = ParseTyped(schema, path, k, depth);
        if (!m.ok()) return m.status();
        u.members.push_back(*m);
      }
      return Add(std::move(u));
    }
    return ParseTyped(schema, path, kinds[0], depth);
  }

  absl::StatusOr<int> ParseTyped(const Json& schema, const std::string& path, SchemaNode::Kind kind,
                                 int depth) {
    SchemaNode node = OfKind(kind);
    if (kind == SchemaNode::kObject) {
      std::vector<std::string> required;
      if (schema.contains("required")) {
        const Json& r = schema["required"];
        if (!r.is_array()) return Error(path, "required", "must be an array of property names");
        for (const Json& n : r) {
          if (!n.is_string()) return Error(path, "required", "must be an array of property names");
          required.push_back(n.get<std::string>());
        }
      }
      if (schema.contains("properties")) {
        const Json& props = schema["properties"];
        if (!props.is_object()) return Error(path, "properties", "must be an object");
        if (props.size() > kMaxObjectProperties)
          return Error(path, "properties",
                       absl::StrCat("more than ", kMaxObjectProperties,
                                    " properties in one object are not supported"));
        for (const auto& [name, sub] : props.items()) {
          auto child = ParseNode(sub, absl::StrCat(path, ".properties.", name), false, depth + 1);
          if (!child.ok()) return child.status();
          const bool req = std::find(required.begin(), required.end(), name) != required.end();
          node.properties.push_back({name, *child, req});
        }
      }
      for (const std::string& r : required) {
        const bool declared =
            std::any_of(node.properties.begin(), node.properties.end(),
                        [&](const SchemaNode::Property& p) { return p.name == r; });
        if (!declared)
          return Error(path, "required",
                       absl::StrCat("names \"", r, "\", which is not in \"properties\""));
      }
    } else if (kind == SchemaNode::kArray) {
      if (schema.contains("items")) {
        const Json& items = schema["items"];
        if (!items.is_object())
          return Error(path, "items", "must be one schema object (tuple forms are not supported)");
        auto child = ParseNode(items, path + ".items", false, depth + 1);
        if (!child.ok()) return child.status();
        node.items = *child;
      }
      auto lo = Count(schema, path, "minItems", 0);
      if (!lo.ok()) return lo.status();
      auto hi = Count(schema, path, "maxItems", UINT32_MAX);
      if (!hi.ok()) return hi.status();
      if (*lo > *hi) return Error(path, "minItems", "is larger than maxItems");
      node.min_items = *lo;
      node.max_items = *hi;
    } else if (kind == SchemaNode::kString) {
      auto lo = Count(schema, path, "minLength", 0);
      if (!lo.ok()) return lo.status();
      auto hi = Count(schema, path, "maxLength", UINT32_MAX);
      if (!hi.ok()) return hi.status();
      if (*lo > *hi) return Error(path, "minLength", "is larger than maxLength");
      node.min_length = *lo;
      node.max_length = *hi;
    }
    return Add(std::move(node));
  }

  std::string file_, tool_;
  ToolCatalog catalog_;
};

}  // namespace

absl::StatusOr<ToolCatalog> ParseToolCatalog(std::string_view json_text, std::string_view file) {
  return CatalogParser(file).Parse(json_text);
}

ToolCatalog KeepTools(const ToolCatalog& catalog, std::span<const size_t> kept) {
  const std::vector<SchemaNode>& nodes = catalog.nodes;
  std::vector<uint8_t> used(nodes.size(), 0);
  std::vector<int> todo;
  auto reach = [&](int node) {
    if (node >= 0 && !used[node]) {
      used[node] = 1;
      todo.push_back(node);
    }
  };
  for (size_t t : kept) reach(catalog.tools[t].arguments);
  while (!todo.empty()) {
    const SchemaNode& n = nodes[todo.back()];
    todo.pop_back();
    for (const SchemaNode::Property& p : n.properties) reach(p.node);
    reach(n.items);
    for (int m : n.members) reach(m);
  }
  std::vector<int> renumbered(nodes.size(), -1);
  ToolCatalog out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!used[i]) continue;
    renumbered[i] = int(out.nodes.size());
    out.nodes.push_back(nodes[i]);
  }
  auto renumber = [&](int node) { return node < 0 ? node : renumbered[node]; };
  for (SchemaNode& n : out.nodes) {
    for (SchemaNode::Property& p : n.properties) p.node = renumber(p.node);
    n.items = renumber(n.items);
    for (int& m : n.members) m = renumber(m);
  }
  for (size_t t : kept) {
    out.tools.push_back(catalog.tools[t]);
    out.tools.back().arguments = renumber(out.tools.back().arguments);
    out.declarations.push_back(catalog.declarations[t]);
  }
  return out;
}

}  // namespace cact
