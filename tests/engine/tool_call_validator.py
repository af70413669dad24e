#!/usr/bin/python3
"""Independent validator for cact-run's grammar-constrained tool calls.

  tool_call_validator.py OUTPUTS.jsonl

Each line of OUTPUTS.jsonl is {"tools": [...declarations...], "text": "<generated text after
the prompt>", "tool_calls": [...optional: the calls cact-run reported...]}. Exit 0 with a
one-line summary when every line is valid, exit 1 listing the first failures (line: reason).
Importable: validate(tools, text) -> list of calls, or raises ValueError(reason);
check_tools(tools) -> {name: declaration}, or raises ToolsError (.tool, .keyword).

What is independent about it
----------------------------
* It shares no code, tables or grammar with the C++ (engine/ grammar builder, JSON parser,
  schema walker). It is written from the brief and from the official output format
  (needle/model/finetune.py render_example:
  `<think>\\n{reasoning}\\n</think>\\n<tool_call>[{"name":..,"arguments":{..}}]</tool_call><|im_end|>`),
  not from the C++ sources.
* JSON is parsed by CPython's json module in strict mode, with hooks: parse_constant rejects
  NaN/Infinity, object_pairs_hook rejects duplicate keys and keeps key order, parse_float
  marks literals written with a fraction or exponent (so 1.0 is never an integer), and a
  separate scanner rejects whitespace between tokens (the grammar emits compact JSON) and
  every string is checked to be encodable as UTF-8 (lone surrogate escapes are refused).
* Arguments are checked by the third-party jsonschema library (Draft202012Validator), on a
  strict copy of each tool's schema: the annotation/relaxed keywords are dropped and every
  object schema gets additionalProperties false (the grammar never emits undeclared keys).
  Only three things are overridden: the "integer" type (int literals only), "number" (no
  booleans), and enum/const (exact match: no bool==int, no Unicode normalization, an
  integer enum member needs an integer literal).
* The tools file itself is checked against the supported subset independently (refusals
  name the tool and the keyword), so the data in data/ is self-consistent.

Choices where the subset leaves room (strictest reading that a correct grammar still meets)
* Think block: `<think>` + any text without `</think>` (and without the stop token) +
  `</think>\\n`; the text need not start or end with a newline.
* A typed object schema without `properties` (or with additionalProperties true/a schema)
  accepts only `{}` / the declared keys; an untyped schema with no enum/const is any value.
* `parameters` without "type" is an object schema (as the grammar reads it); any other
  type is refused.
* enum/const numbers compare by exact decimal value (3.50 matches 3.5), but an enum member
  written as an integer needs an integer literal (2.0 does not match 2).
* Reported tool_calls are compared as JSON values (key order ignored, 1 == 1.0, true != 1).
* Numbers overflowing a double (1e400) are refused.
"""
import json
import sys
from decimal import Decimal

import jsonschema
from jsonschema import Draft202012Validator

THINK_START, THINK_END = "<think>", "</think>"
CALL_START, CALL_END = "<tool_call>", "</tool_call>"
IM_END = "<|im_end|>"

TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
# Keywords the grammar enforces (kept in the strict copy).
KEPT = {"type", "properties", "required", "additionalProperties", "items", "minItems",
        "maxItems", "minLength", "maxLength", "enum", "const"}
# Keywords refused by the supported subset (uniqueItems only when true).
REFUSED = ["$ref", "oneOf", "anyOf", "allOf", "not", "if", "then", "else", "pattern",
           "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
           "dependencies", "prefixItems", "contains", "unevaluatedProperties",
           "unevaluatedItems", "minProperties", "maxProperties"]


class ToolsError(ValueError):
    """A tools file outside the supported subset: .tool (name or "-") and .keyword."""

    def __init__(self, tool, keyword, message):
        super().__init__(f"tool {tool}: {keyword}: {message}")
        self.tool, self.keyword = tool, keyword


# ----------------------------------------------------------------------------- JSON parsing

class JFloat(float):
    """A JSON number written with a fraction or an exponent; .text is the literal."""

    def __new__(cls, text):
        value = float.__new__(cls, text)
        value.text = text
        return value


def _parse_float(text):
    value = JFloat(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} overflows a double")
    return value


def _parse_constant(name):
    raise ValueError(f"non-JSON constant {name}")


def _pairs(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_parse_constant,
                           object_pairs_hook=_pairs, strict=True)


def loads(text):
    """Strict JSON (whole document, surrounding whitespace tolerated as json.loads does)."""
    return DECODER.decode(text)


def _check_utf8(value, where):
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}: lone surrogate (not valid UTF-8)") from None
    elif isinstance(value, list):
        for item in value:
            _check_utf8(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_utf8(key, where)
            _check_utf8(item, where)


def _check_compact(body):
    """No whitespace between tokens (outside string literals)."""
    in_string = escaped = False
    for index, char in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in " \t\r\n":
            raise ValueError(f"whitespace between JSON tokens at offset {index} (not compact)")


# ----------------------------------------------------------------------------- exact equality

def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _decimal(value):
    return Decimal(value.text) if isinstance(value, JFloat) else Decimal(repr(value)) \
        if isinstance(value, float) else Decimal(value)


def enum_equal(declared, value):
    """Exact JSON equality for enum/const: kinds differ => unequal (True != 1, 1 != "1"),
    strings compared code point by code point, numbers by exact decimal value, and an
    integer-literal member only matches an integer literal."""
    if declared is None or isinstance(declared, bool):
        return type(value) is type(declared) and value == declared
    if _number(declared):
        if not _number(value):
            return False
        if isinstance(declared, int) and not isinstance(value, int):
            return False
        return _decimal(declared) == _decimal(value)
    if isinstance(declared, str):
        return isinstance(value, str) and declared == value
    if isinstance(declared, list):
        return isinstance(value, list) and len(value) == len(declared) and all(
            enum_equal(d, v) for d, v in zip(declared, value))
    if isinstance(declared, dict):
        return isinstance(value, dict) and set(value) == set(declared) and all(
            enum_equal(declared[k], value[k]) for k in declared)
    return False


def json_equal(a, b):
    """JSON value equality for reported calls (numbers by value, kinds otherwise distinct)."""
    if _number(a) and _number(b):
        return _decimal(a) == _decimal(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------------------- tools subset

def _types(schema):
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _check_schema(tool, schema, path):
    if not isinstance(schema, dict):
        raise ToolsError(tool, path.rsplit("/", 1)[-1] or "parameters",
                         f"schema at {path or '/'} is not an object")
    for keyword in REFUSED:
        if keyword in schema:
            raise ToolsError(tool, keyword, f"unsupported keyword at {path or '/'}")
    if schema.get("uniqueItems") is True:
        raise ToolsError(tool, "uniqueItems", f"uniqueItems: true at {path or '/'}")
    if "type" in schema:
        kind = schema["type"]
        names = [kind] if isinstance(kind, str) else kind
        if not isinstance(names, list) or not names or any(
                not isinstance(n, str) or n not in TYPES for n in names):
            raise ToolsError(tool, "type", f"unknown type {kind!r} at {path or '/'}")
    if "properties" in schema and not isinstance(schema["properties"], dict):
        raise ToolsError(tool, "properties", f"properties is not an object at {path or '/'}")
    properties = schema.get("properties", {})
    if "required" in schema:
        required = schema["required"]
        if not isinstance(required, list) or any(not isinstance(r, str) for r in required):
            raise ToolsError(tool, "required", f"required is not an array of strings at {path or '/'}")
        for name in required:
            if name not in properties:
                raise ToolsError(tool, "required",
                                 f"required names undeclared property {name!r} at {path or '/'}")
    if "enum" in schema:
        if not isinstance(schema["enum"], list) or not schema["enum"]:
            raise ToolsError(tool, "enum", f"enum must be a non-empty array at {path or '/'}")
    for keyword in ("minItems", "maxItems", "minLength", "maxLength"):
        if keyword in schema:
            value = schema[keyword]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ToolsError(tool, keyword, f"{keyword} must be a non-negative integer")
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"],
                                                           (bool, dict)):
        raise ToolsError(tool, "additionalProperties", "must be a boolean or a schema")
    for name, sub in properties.items():
        _check_schema(tool, sub, f"{path}/properties/{name}")
    if "items" in schema:
        _check_schema(tool, schema["items"], f"{path}/items")


def check_tools(tools):
    """The supported subset; returns {name: parameters-or-None} in declaration order."""
    if not isinstance(tools, list):
        raise ToolsError("-", "tools", "the tools file is not a JSON array")
    declared = {}
    for index, entry in enumerate(tools):
        if not isinstance(entry, dict):
            raise ToolsError("-", "declaration", f"declaration {index} is not an object")
        if entry.get("type") == "function" and "function" in entry:
            entry = entry["function"]
            if not isinstance(entry, dict):
                raise ToolsError("-", "function", f"declaration {index}: function is not an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ToolsError("-", "name", f"declaration {index}: missing, empty or non-string name")
        if name in declared:
            raise ToolsError(name, "name", "duplicate tool name")
        if "description" in entry and not isinstance(entry["description"], str):
            raise ToolsError(name, "description", "description is not a string")
        parameters = entry.get("parameters")
        if "parameters" in entry:
            if not isinstance(parameters, dict):
                raise ToolsError(name, "parameters", "parameters is not an object schema")
            if parameters.get("type", "object") != "object":
                raise ToolsError(name, "type", "parameters' type is not \"object\"")
            parameters = {**parameters, "type": "object"}
            _check_schema(name, parameters, "")
        declared[name] = parameters
    return declared


def strict_schema(schema):
    """A copy the grammar's language must satisfy: only the enforced keywords, and
    additionalProperties false on every object schema (typed object or with properties)."""
    out = {k: v for k, v in schema.items() if k in KEPT}
    types = _types(schema)
    if "properties" in schema:
        out["properties"] = {name: strict_schema(sub) for name, sub in schema["properties"].items()}
    if "items" in schema:
        out["items"] = strict_schema(schema["items"])
    if "properties" in schema or (types is not None and "object" in types):
        out["additionalProperties"] = False
    else:
        out.pop("additionalProperties", None)
    return out


# ----------------------------------------------------------------------------- jsonschema

def _is_integer(checker, instance):
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance):
    return _number(instance)


def _enum(validator, enums, instance, schema):
    if not any(enum_equal(member, instance) for member in enums):
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r} (exact match)")


def _const(validator, const, instance, schema):
    if not enum_equal(const, instance):
        yield jsonschema.ValidationError(f"{const!r} was expected (exact match)")


StrictValidator = jsonschema.validators.extend(
    Draft202012Validator,
    validators={"enum": _enum, "const": _const},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}))


# ----------------------------------------------------------------------------- the output

def split_text(text):
    """(think text or None, JSON body) per the grammar; raises ValueError."""
    if not isinstance(text, str):
        raise ValueError("text is not a string")
    _check_utf8(text, "text")
    rest, think = text, None
    if rest.startswith(THINK_START):
        end = rest.find(THINK_END)
        if end < 0:
            raise ValueError("missing </think>")
        think = rest[len(THINK_START):end]
        if IM_END in think:
            raise ValueError("stop token <|im_end|> inside the think block")
        rest = rest[end + len(THINK_END):]
        if not rest.startswith("\n"):
            raise ValueError("</think> not followed by a newline")
        rest = rest[1:]
    if not rest.startswith(CALL_START):
        raise ValueError("expected <tool_call>" + (" after the think block" if think is not None
                                                   else " (or <think>) at the start"))
    rest = rest[len(CALL_START):]
    try:
        body_value, end = DECODER.raw_decode(rest, 0)
    except ValueError as error:
        raise ValueError(f"invalid JSON in <tool_call>: {error}") from None
    body, after = rest[:end], rest[end:]
    if not after.startswith(CALL_END):
        if CALL_END in after:
            raise ValueError("trailing text between the JSON and </tool_call>")
        raise ValueError("missing </tool_call>")
    after = after[len(CALL_END):]
    if after and after != IM_END:
        if after.startswith(IM_END):
            raise ValueError("text after <|im_end|>")
        raise ValueError("trailing text after </tool_call>")
    _check_compact(body)
    _check_utf8(body_value, "tool call")
    return think, body_value


def validate(tools, text):
    """The calls in text (list of {"name", "arguments"}) or ValueError(reason)."""
    declared = check_tools(tools)
    _, calls = split_text(text)
    if not isinstance(calls, list):
        raise ValueError("the tool call body is not a JSON array")
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            raise ValueError(f"call {index} is not an object")
        if list(call) != ["name", "arguments"]:
            raise ValueError(f"call {index}: keys {list(call)} are not exactly [\"name\", \"arguments\"]"
                             " in that order")
        name = call["name"]
        if not isinstance(name, str):
            raise ValueError(f"call {index}: name is not a string")
        if name not in declared:
            raise ValueError(f"call {index}: unknown tool {name!r}")
        arguments = call["arguments"]
        if not isinstance(arguments, dict):
            raise ValueError(f"call {index} ({name}): arguments is not an object")
        parameters = declared[name]
        if parameters is None:
            if arguments:
                raise ValueError(f"call {index} ({name}): the tool has no parameters but "
                                 f"arguments has keys {list(arguments)}")
            continue
        error = jsonschema.exceptions.best_match(
            StrictValidator(strict_schema(parameters)).iter_errors(arguments))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise ValueError(f"call {index} ({name}): arguments {where}: {error.message}"
                             f" [{error.validator}]")
    return calls


def validate_record(record):
    """One OUTPUTS.jsonl record; returns the calls or raises ValueError."""
    if not isinstance(record, dict) or "tools" not in record or "text" not in record:
        raise ValueError("record must be an object with \"tools\" and \"text\"")
    calls = validate(record["tools"], record["text"])
    if "tool_calls" in record and not json_equal(record["tool_calls"], calls):
        raise ValueError("reported tool_calls differ from the calls in the text: "
                         f"{json.dumps(record['tool_calls'], ensure_ascii=False)} vs "
                         f"{json.dumps(calls, ensure_ascii=False)}")
    return calls


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    total, failures = 0, []
    with open(argv[1], encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            total += 1
            try:
                validate_record(loads(line))
            except ValueError as error:
                failures.append(f"line {number}: {error}")
    if failures:
        print(f"tool_call_validator: {len(failures)} of {total} invalid", file=sys.stderr)
        for failure in failures[:20]:
            print("  " + failure, file=sys.stderr)
        return 1
    print(f"tool_call_validator: {total} valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
