#!/usr/bin/python3
"""Exports every output the validator self-test (tool_call_validator_test.py) checks, as JSONL,
for the C++ grammar test (tests/engine/tool_call_grammar_test.cc).

  tool_call_cases.py OUT.jsonl

The self-test is run as is, with tool_call_validator.validate wrapped to record each
(tools, text) it is asked about, its verdict and the self-test's label for it (`what`). Each
line: {"what", "tools", "text", "valid", "canonical", "with_stop", "with_stop_valid"}, the
three texts as the hex of their UTF-8 bytes (a lone surrogate as its 3-byte form, which is
what a byte-level grammar would see):
  canonical   valid outputs only: the grammar's compact form of the same answer, the think block
              as written, then "<tool_call>" + json.dumps(calls, separators=(",", ":"),
              ensure_ascii=False) + "</tool_call><|im_end|>" (null when it is not valid itself)
  with_stop   the text with "<|im_end|>" appended when it does not end with it
  with_stop_valid  the validator's verdict on with_stop
Exit 0 when the self-test passed and at least 20 valid and 20 invalid outputs were recorded.
"""
import contextlib
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tool_call_validator as v  # noqa: E402

records = []
_validate = v.validate


def _is_valid(tools, text):
    try:
        _validate(tools, text)
        return True
    except ValueError:
        return False


def recording_validate(tools, text):
    what = sys._getframe(1).f_locals.get("what", "")
    try:
        calls = _validate(tools, text)
    except ValueError:
        records.append((what, tools, text, None))
        raise
    records.append((what, tools, text, calls))
    return calls


def canonical(text, calls):
    head = ""
    if text.startswith(v.THINK_START):
        head = text[:text.find(v.THINK_END) + len(v.THINK_END)] + "\n"
    return (head + v.CALL_START + json.dumps(calls, separators=(",", ":"), ensure_ascii=False)
            + v.CALL_END + v.IM_END)


def _hex(text):
    return text.encode("utf-8", "surrogatepass").hex()


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    v.validate = recording_validate
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            import tool_call_validator_test  # noqa: F401  (runs the self-test)
    except SystemExit as e:
        if e.code:
            print(out.getvalue(), file=sys.stderr)
            return 1
    v.validate = _validate
    seen, valid, invalid = set(), 0, 0
    with open(argv[1], "w", encoding="utf-8") as f:
        for what, tools, text, calls in records:
            key = (json.dumps(tools, sort_keys=True), text)
            if key in seen:
                continue
            seen.add(key)
            with_stop = text if text.endswith(v.IM_END) else text + v.IM_END
            row = {"what": what, "tools": tools, "text": _hex(text), "valid": calls is not None,
                   "with_stop": _hex(with_stop), "with_stop_valid": _is_valid(tools, with_stop)}
            if calls is not None:
                c = canonical(text, calls)
                row["canonical"] = _hex(c) if _is_valid(tools, c) else None
                valid += 1
            else:
                invalid += 1
            f.write(json.dumps(row) + "\n")
    print(f"tool_call_cases: {valid} valid, {invalid} invalid outputs")
    return 0 if valid >= 20 and invalid >= 20 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
