#!/usr/bin/python3
"""Self-test of tool_call_validator.py: it accepts the valid outputs (think block, [], several
calls, non-ASCII, every catalogue tool in data/tool_schemas.json) and rejects each hand-written
invalid output with the expected reason; every catalogue passes the subset check and every
data/bad_tools file is refused naming the expected tool and keyword; the command line exits
0/1 as documented.  Exit status non-zero on any failure.

usage: tool_call_validator_test.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tool_call_validator as v  # noqa: E402

DATA = os.path.join(HERE, "data")
CATALOGS = {c["id"]: c for c in json.load(open(os.path.join(DATA, "tool_schemas.json"),
                                               encoding="utf-8"))["catalogs"]}
EIGHT = CATALOGS["eight_tools_all_types"]["tools"]
UNIONS = CATALOGS["unions_consts_enums"]["tools"]
RELAXED = CATALOGS["relaxed_numeric_bounds"]["tools"]
WRAPPED = CATALOGS["openai_wrapped_unicode"]["tools"]
failures = []
checked = 0


def check(condition, what):
    global checked
    checked += 1
    if not condition:
        failures.append(what)


def compact(value, ascii_only=False):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)


def calls_text(calls, think=None, end=v.IM_END, ascii_only=False):
    head = f"<think>{think}</think>\n" if think is not None else ""
    return head + "<tool_call>" + compact(calls, ascii_only) + "</tool_call>" + end


def accept(tools, text, what, expected=None):
    try:
        calls = v.validate(tools, text)
    except ValueError as error:
        check(False, f"valid output rejected ({what}): {error}\n    text: {text!r}")
        return
    check(expected is None or v.json_equal(calls, expected),
          f"valid output parsed wrongly ({what}): {calls!r}")


def reject(tools, text, reason, what):
    try:
        calls = v.validate(tools, text)
    except ValueError as error:
        check(reason in str(error),
              f"invalid output ({what}) rejected for the wrong reason:\n    expected {reason!r}"
              f"\n    got {error}")
        return
    check(False, f"invalid output accepted ({what}): {calls!r}\n    text: {text!r}")


# ------------------------------------------------------------------ instances from schemas

def instance(schema, full):
    """A value the strict schema accepts: required keys only, or every key (full)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][-1 if full else 0]
    kinds = schema.get("type")
    if kinds is None:
        return {"any": [1, "x", None, {"é": True}]} if full else 0
    kind = kinds if isinstance(kinds, str) else kinds[-1 if full else 0]
    if kind == "object":
        props = schema.get("properties", {})
        keys = list(props) if full else schema.get("required", [])
        return {k: instance(props[k], full) for k in keys}
    if kind == "array":
        low, high = schema.get("minItems", 0), schema.get("maxItems", 3)
        count = max(low, min(2, high)) if full else low
        return [instance(schema.get("items", {}), full) for _ in range(count)]
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
        text = "Zoë \"日本\" \\ </tool_call> <think> 😀 \u2028" if full else "x" * low
        text = text[:high]
        return text + "a" * (low - len(text))
    return {"integer": -7, "number": 2.5e-3, "boolean": True, "null": None}[kind]


def declarations(tools):
    return [t["function"] if t.get("type") == "function" and "function" in t else t for t in tools]


# ------------------------------------------------------------------ catalogues and bad tools

for cid, catalog in CATALOGS.items():
    try:
        v.check_tools(catalog["tools"])
    except v.ToolsError as error:
        check(False, f"catalogue {cid} refused: {error}")
        continue
    check(len(catalog["queries"]) >= 3, f"catalogue {cid}: fewer than 3 queries")
    numeric = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    found = {k for k in numeric if f'"{k}"' in json.dumps(catalog["tools"])}
    check(found <= set(catalog.get("relaxed", [])), f"catalogue {cid}: numeric bounds {found}")
    all_calls = []
    for decl in declarations(catalog["tools"]):
        params = decl.get("parameters")
        for full in (False, True):
            args = instance(params, full) if params is not None else {}
            call = [{"name": decl["name"], "arguments": args}]
            all_calls += call
            accept(catalog["tools"], calls_text(call), f"{cid}/{decl['name']} full={full}", call)
            accept(catalog["tools"], calls_text(call, ascii_only=True, end=""),
                   f"{cid}/{decl['name']} \\u-escaped, no stop token", call)
    accept(catalog["tools"], calls_text(all_calls, think="\nall of them\n"), f"{cid}: every call", all_calls)
    accept(catalog["tools"], calls_text([], think="\nnothing applies\n"), f"{cid}: []", [])

with open(os.path.join(DATA, "bad_tools", "expected.tsv"), encoding="utf-8") as tsv:
    rows = [line.rstrip("\n").split("\t") for line in tsv if line.strip() and not line.startswith("#")]
check(len(rows) >= 20, "fewer than 20 bad tools files")
listed = {row[0] for row in rows}
on_disk = {f for f in os.listdir(os.path.join(DATA, "bad_tools")) if f.endswith(".json")}
check(listed == on_disk, f"expected.tsv and data/bad_tools differ: {listed ^ on_disk}")
for name, tool, keyword in rows:
    tools = json.load(open(os.path.join(DATA, "bad_tools", name), encoding="utf-8"))
    try:
        v.check_tools(tools)
        check(False, f"bad tools {name} accepted")
    except v.ToolsError as error:
        check(error.tool == tool and keyword in str(error),
              f"bad tools {name}: expected tool {tool} keyword {keyword}, got {error}")
    # An output against refused tools is never valid.
    reject(tools, "<tool_call>[]</tool_call>", keyword, f"output with bad tools {name}")

# ------------------------------------------------------------------ valid outputs

SEND = {"name": "send_message", "arguments": {"to": "bob", "body": "hi"}}
T = EIGHT
accept(T, '<tool_call>[{"name":"send_message","arguments":{"to":"bob","body":"hi"}}]</tool_call><|im_end|>',
       "plain call", [SEND])
accept(T, '<tool_call>[{"name":"send_message","arguments":{"to":"bob","body":"hi"}}]</tool_call>',
       "no stop token", [SEND])
accept(T, "<think>\nBob needs a message.\n</think>\n" + calls_text([SEND])[len(""):], "think block", [SEND])
accept(T, "<think></think>\n<tool_call>[]</tool_call><|im_end|>", "empty think, []", [])
accept(T, "<tool_call>[]</tool_call>", "[] without think or stop token", [])
accept(T, "<think>\n<tool_call> is not closed here; ünïcödé 日本 \"q\" \\\n</think>\n<tool_call>[]</tool_call>",
       "think text containing markup and non-ASCII", [])
multi = [SEND, {"name": "get_time", "arguments": {}}, {"name": "refresh", "arguments": {}},
         {"name": "search_recipes", "arguments": {"query": "tarte", "diet": "végétarien", "tags": ["日本", "naïve"],
                                                  "pattern": "^x$", "not": False, "type": "dessert"}},
         {"name": "set_thermostat", "arguments": {"temperature": -0.5e1, "mode": None, "fan": "auto", "schedule": None}},
         SEND]
accept(T, calls_text(multi, think="\nseveral\n"), "six calls incl. a repeat", multi)
accept(T, '<tool_call>[{"name":"search_recipes","arguments":{"query":"caf\\u00e9 \\ud83d\\ude00","diet":"caf\\u00e9"}}]</tool_call>',
       "\\u escapes incl. a surrogate pair", [{"name": "search_recipes", "arguments": {"query": "café 😀", "diet": "café"}}])
accept(T, '<tool_call>[{"name":"send_message","arguments":{"to":"a\\/b","body":"</tool_call><|im_end|>","priority":3,"urgent":false,"cc":null}}]</tool_call>',
       "markup inside a JSON string", None)
accept(T, '<tool_call>[{"name":"set_flags","arguments":{"flags":[true,false,true],"mode":"strict","ratio":1,"label":"日本日本日本日本日本"}}]</tool_call>',
       "integer literal for number; maxLength counts code points", None)
accept(T, '<tool_call>[{"name":"log_event","arguments":{"payload":{"a":[1,2.5,{"b":null}]},"level":false}}]</tool_call>',
       "untyped payload; boolean enum member", None)
accept(T, '<tool_call>[{"name":"log_event","arguments":{"payload":[],"level":1.50,"count":-0}}]</tool_call>',
       "number enum member by exact decimal value", None)
accept(UNIONS, '<tool_call>[{"name":"update_profile","arguments":{"nickname":null,"tier":3.5,"version":2,'
       '"meta":{"tags":["a","é"],"source":"app"},"age":"forty","aliases":null,"extra":{"k":"v"},"open":{},'
       '"anything":[1,{"z":"y"}],"nothing":null,"visible":true}}]</tool_call>',
       "unions, const object in another key order", None)
accept(UNIONS, '<tool_call>[{"name":"rate","arguments":{"stars":5,"weights":[0,1.5,-2e3],"matrix":[[1,2],[]]}}]</tool_call>',
       "integer enum, fixed-length array, nested arrays", None)
accept(RELAXED, '<tool_call>[{"name":"set_volume","arguments":{"level":99,"balance":-7.5}},'
       '{"name":"seek","arguments":{"seconds":-1}}]</tool_call>', "relaxed minimum/maximum ignored", None)
accept(WRAPPED, '<tool_call>[{"name":"translate","arguments":{"text":"bonjour","target":"Ελληνικά"}},'
       '{"name":"ping","arguments":{}}]</tool_call>', "OpenAI-wrapped tools", None)

# ------------------------------------------------------------------ invalid outputs

def one(name, arguments_json, tools=T, think=None):
    head = f"<think>{think}</think>\n" if think is not None else ""
    return (tools, head + '<tool_call>[{"name":"' + name + '","arguments":' + arguments_json + '}]</tool_call>')


INVALID = [
    ("missing required", one("send_message", '{"to":"bob"}'), "'body' is a required property"),
    ("extra key", one("send_message", '{"to":"bob","body":"hi","bcc":"x"}'), "[additionalProperties]"),
    ("duplicate key in arguments", one("send_message", '{"to":"bob","body":"hi","to":"eve"}'), "duplicate key 'to'"),
    ("duplicate key in call", (T, '<tool_call>[{"name":"get_time","name":"get_time","arguments":{}}]</tool_call>'),
     "duplicate key 'name'"),
    ("wrong enum", one("send_message", '{"to":"b","body":"h","priority":4}'), "is not one of"),
    ("enum café in NFD (e + U+0301)", one("search_recipes", '{"query":"q","diet":"cafe\u0301"}'), "is not one of"),
    ("enum naïve in NFD via escape", one("search_recipes", '{"query":"q","diet":"nai\\u0308ve"}'), "is not one of"),
    ("enum 日本 with a trailing space", one("search_recipes", '{"query":"q","diet":"日本 "}'), "is not one of"),
    ("1.0 for integer", one("create_order", '{"customer":{"name":"A","address":{"city":"K","country":"日本"}},'
                            '"items":[{"sku":"ABC","qty":1.0}]}'), "is not of type 'integer'"),
    ("1e2 for integer", one("send_message", '{"to":"b","body":"h","priority":1e2}'), "is not of type 'integer'"),
    ("2.0 for untyped integer enum member", one("log_event", '{"payload":1,"level":0.0}'), "is not one of"),
    ("true for integer", one("send_message", '{"to":"b","body":"h","priority":true}'), "is not of type 'integer'"),
    ("const 2 written 2.0", one("update_profile", '{"nickname":null,"tier":1,"version":2.0}', UNIONS), "was expected"),
    ("false is not the enum member 0", one("update_profile", '{"nickname":null,"tier":false,"version":2}', UNIONS),
     "is not one of"),
    ("1 is not the enum member true", one("update_profile", '{"nickname":"z","tier":1,"version":2,"visible":1}', UNIONS),
     "is not of type 'boolean'"),
    ("const object differs", one("update_profile", '{"nickname":null,"tier":1,"version":2,"meta":{"source":"app","tags":["a","e"]}}',
                                 UNIONS), "was expected"),
    ("key in a typed object without properties", one("update_profile", '{"nickname":null,"tier":1,"version":2,"open":{"k":"v"}}',
                                                     UNIONS), "[additionalProperties]"),
    ("undeclared key next to additionalProperties true", one("update_profile",
     '{"nickname":null,"tier":1,"version":2,"extra":{"k":"v","j":"w"}}', UNIONS), "[additionalProperties]"),
    ("NaN", one("set_thermostat", '{"temperature":NaN,"mode":"heat"}'), "non-JSON constant NaN"),
    ("-Infinity", one("set_thermostat", '{"temperature":-Infinity,"mode":"heat"}'), "non-JSON constant -Infinity"),
    ("number overflowing a double", one("set_thermostat", '{"temperature":1e400,"mode":"heat"}'), "overflows"),
    ("string for number", one("set_thermostat", '{"temperature":"21","mode":"heat"}'), "is not of type 'number'"),
    ("const mismatch", one("set_flags", '{"flags":[true,true],"mode":"Strict"}'), "was expected"),
    ("minItems", one("set_flags", '{"flags":[true],"mode":"strict"}'), "is too short"),
    ("maxItems", one("search_recipes", '{"query":"q","tags":["a","b","c","d","e","f"]}'), "is too long"),
    ("maxLength in code points", one("set_flags", '{"flags":[true,true],"mode":"strict","label":"日本日本日本日本日本日"}'),
     "is too long"),
    ("minLength in code points (é is 2 bytes)", one("set_flags", '{"flags":[true,true],"mode":"strict","label":"é"}'),
     "is too short"),
    ("union [string,null] given a number", one("send_message", '{"to":"b","body":"h","cc":5}'), "is not of type"),
    ("nested extra key 3 levels down", one("create_order", '{"customer":{"name":"A","address":{"city":"K","country":"日本"}},'
     '"items":[{"sku":"ABC","qty":1,"options":[{"key":"k","value":true,"x":1}]}]}'), "[additionalProperties]"),
    ("nested missing required", one("create_order", '{"customer":{"name":"A","address":{"city":"K"}},"items":[{"sku":"ABC","qty":1}]}'),
     "'country' is a required property"),
    ("arguments for a tool without parameters", one("get_time", '{"tz":"UTC"}'), "has no parameters"),
    ("arguments for an empty parameter list", one("refresh", '{"force":true}'), "[additionalProperties]"),
    ("arguments not an object", one("get_time", '[]'), "arguments is not an object"),
    ("unknown tool", one("get_weather", '{}'), "unknown tool 'get_weather'"),
    ("tool name differing in case", one("Get_Time", '{}'), "unknown tool"),
    ("wrong key order", (T, '<tool_call>[{"arguments":{},"name":"get_time"}]</tool_call>'), "in that order"),
    ("extra key in the call", (T, '<tool_call>[{"name":"get_time","arguments":{},"id":"1"}]</tool_call>'), "in that order"),
    ("missing arguments", (T, '<tool_call>[{"name":"get_time"}]</tool_call>'), "in that order"),
    ("name not a string", (T, '<tool_call>[{"name":null,"arguments":{}}]</tool_call>'), "name is not a string"),
    ("call not an object", (T, '<tool_call>["get_time"]</tool_call>'), "is not an object"),
    ("body not an array", (T, '<tool_call>{"name":"get_time","arguments":{}}</tool_call>'), "not a JSON array"),
    ("truncated JSON", (T, '<tool_call>[{"name":"send_message","arguments":{"to":"bob"'), "invalid JSON"),
    ("truncated string", (T, '<tool_call>[{"name":"send_mes'), "invalid JSON"),
    ("empty body", (T, '<tool_call></tool_call>'), "invalid JSON"),
    ("missing </tool_call>", (T, '<tool_call>[]'), "missing </tool_call>"),
    ("missing </tool_call> before the stop token", (T, '<tool_call>[]<|im_end|>'), "missing </tool_call>"),
    ("trailing text after </tool_call>", (T, '<tool_call>[]</tool_call> done'), "trailing text after </tool_call>"),
    ("newline after </tool_call>", (T, '<tool_call>[]</tool_call>\n<|im_end|>'), "trailing text after </tool_call>"),
    ("second <tool_call> block", (T, '<tool_call>[]</tool_call><tool_call>[]</tool_call>'), "trailing text after </tool_call>"),
    ("text after <|im_end|>", (T, '<tool_call>[]</tool_call><|im_end|>\n'), "text after <|im_end|>"),
    ("junk between JSON and </tool_call>", (T, '<tool_call>[]]</tool_call>'), "between the JSON and </tool_call>"),
    ("missing </think>", (T, '<think>\nhmm\n<tool_call>[]</tool_call>'), "missing </think>"),
    ("</think> without newline", (T, '<think>\nhmm\n</think><tool_call>[]</tool_call>'), "not followed by a newline"),
    ("two newlines after </think>", (T, '<think>\nhmm\n</think>\n\n<tool_call>[]</tool_call>'), "expected <tool_call>"),
    ("stop token inside think", (T, '<think>\na<|im_end|>b\n</think>\n<tool_call>[]</tool_call>'), "inside the think block"),
    ("leading newline", (T, '\n<tool_call>[]</tool_call>'), "expected <tool_call>"),
    ("plain text answer", (T, 'The time is noon.<|im_end|>'), "expected <tool_call>"),
    ("markdown fence", (T, '```json\n[]\n```'), "expected <tool_call>"),
    ("lone high surrogate escape", one("send_message", '{"to":"\\ud800","body":"h"}'), "lone surrogate"),
    ("lone low surrogate escape", one("send_message", '{"to":"b","body":"\\udc00x"}'), "lone surrogate"),
    ("lone surrogate escape in a key", one("log_event", '{"payload":{"\\udfff":1},"level":"info"}'), "lone surrogate"),
    ("lone surrogate in the raw text", (T, '<think>\n\ud800\n</think>\n<tool_call>[]</tool_call>'), "lone surrogate"),
    ("raw newline inside a string", one("send_message", '{"to":"b","body":"line1\nline2"}'), "Invalid control character"),
    ("raw tab inside a string", one("send_message", '{"to":"b","body":"a\tb"}'), "Invalid control character"),
    ("space after a colon", one("send_message", '{"to": "b","body":"h"}'), "not compact"),
    ("space inside the array", (T, '<tool_call>[ ]</tool_call>'), "not compact"),
    ("newline between calls", (T, '<tool_call>[{"name":"get_time","arguments":{}},\n{"name":"refresh","arguments":{}}]</tool_call>'),
     "not compact"),
    ("single quotes", (T, "<tool_call>[{'name':'get_time','arguments':{}}]</tool_call>"), "invalid JSON"),
    ("trailing comma", (T, '<tool_call>[{"name":"get_time","arguments":{}},]</tool_call>'), "invalid JSON"),
    ("invalid escape", one("send_message", '{"to":"\\x41","body":"h"}'), "invalid JSON"),
    ("leading zero", one("send_message", '{"to":"b","body":"h","priority":01}'), "invalid JSON"),
]
check(len(INVALID) >= 20, "fewer than 20 invalid outputs")
for what, (tools, text), reason in INVALID:
    reject(tools, text, reason, what)

# Refused tools in the catalogue are refused by validate too (not only check_tools).
reject([{"name": "x", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "a"}}}}],
       "<tool_call>[]</tool_call>", "pattern", "output against a tool using pattern")

# ------------------------------------------------------------------ reported tool_calls and CLI

def record(tools, text, **extra):
    return dict(tools=tools, text=text, **extra)


good = calls_text([SEND])
try:
    v.validate_record(record(T, good, tool_calls=[SEND]))
    check(True, "")
except ValueError as error:
    check(False, f"matching tool_calls rejected: {error}")
for what, reported in [("different argument", [{"name": "send_message", "arguments": {"to": "bob", "body": "hI"}}]),
                       ("missing call", []),
                       ("true vs 1", [{"name": "send_message", "arguments": {"to": "bob", "body": "hi", "urgent": 1}}])]:
    try:
        v.validate_record(record(T, good, tool_calls=reported))
        check(False, f"tool_calls mismatch accepted ({what})")
    except ValueError as error:
        check("differ" in str(error), f"tool_calls mismatch ({what}): wrong reason {error}")

with tempfile.TemporaryDirectory() as tmp:
    ok_path, bad_path = os.path.join(tmp, "ok.jsonl"), os.path.join(tmp, "bad.jsonl")
    with open(ok_path, "w", encoding="utf-8") as f:
        for text in (good, calls_text([], think="\nnone\n"), calls_text(multi)):
            f.write(json.dumps(record(T, text, tool_calls=v.validate(T, text)), ensure_ascii=False) + "\n")
    with open(bad_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(record(T, good)) + "\n\n")
        f.write(json.dumps(record(T, '<tool_call>[{"name":"nope","arguments":{}}]</tool_call>')) + "\n")
        f.write(json.dumps(record(T, good, tool_calls=[])) + "\n")
    script = os.path.join(HERE, "tool_call_validator.py")
    run = subprocess.run([sys.executable, script, ok_path], capture_output=True, text=True)
    check(run.returncode == 0 and "3 valid" in run.stdout, f"CLI on valid outputs: {run}")
    run = subprocess.run([sys.executable, script, bad_path], capture_output=True, text=True)
    check(run.returncode == 1 and "line 3: " in run.stderr and "unknown tool" in run.stderr
          and "line 4: " in run.stderr and "line 1:" not in run.stderr, f"CLI on invalid outputs: {run}")

if failures:
    print(f"tool_call_validator_test: {len(failures)} of {checked} checks FAILED", file=sys.stderr)
    for failure in failures:
        print("  " + failure, file=sys.stderr)
    sys.exit(1)
print(f"tool_call_validator_test: {checked} checks passed ({len(INVALID)} invalid outputs rejected, "
      f"{len(CATALOGS)} catalogues, {len(rows)} bad tools files)")
