"""docs/reference-model/tool_call_data.py: deterministic, held-out values and phrasings never
in training, and pre-training text whose first turn is the official rendering (render_oracle).

  tool_call_data_test.py SOURCE_DIR
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

SOURCE = sys.argv[1]
UMASK = os.umask(0)
os.umask(UMASK)
sys.path.insert(0, os.path.join(SOURCE, "tests", "train"))
sys.path.insert(0, os.path.join(SOURCE, "docs", "reference-model"))
import render_oracle  # noqa: E402
import tool_call_data  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def generate(out):
    subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "docs", "reference-model", "tool_call_data.py"),
                    out, "--train", "1500", "--heldout", "120"], check=True, capture_output=True)
    files = {}
    for root, _, names in os.walk(out):
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                files[os.path.relpath(os.path.join(root, n), out)] = f.read()
    return files


def rows(files, name):
    return [json.loads(l) for l in files[name].decode().splitlines()]


def value(row):
    return next(iter(row["answers"][0]["arguments"].values())) if row["answers"] else None


def template_regex(template, value):
    """A training template filled with `value` as the generator may dress it: an opening, a
    closing before the final punctuation, the first letter in either case."""
    body = template.rstrip("?.!")
    alternatives = lambda xs: "(?:" + "|".join(re.escape(x) for x in xs) + ")?"
    pattern = re.escape(body).replace(r"\{\}", re.escape(str(value)))
    pattern = "(?i:" + pattern[0] + ")" + pattern[1:] if body[0].isalpha() else pattern
    return re.compile("^" + alternatives(tool_call_data.OPENINGS) + pattern +
                      alternatives(tool_call_data.CLOSINGS) + "[?.!]*$")


with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    first, second = generate(a), generate(b)
check(first == second, "two runs with the same seed wrote different files")

train = rows(first, "train.jsonl")
held_values = rows(first, "heldout-values.jsonl")
held_phrasings = rows(first, "heldout-phrasings.jsonl")
check(len(train) == 1500 and len(held_values) == 120 and len(held_phrasings) == 120, "row counts")

with open(os.path.join(SOURCE, "docs", "reference-model", "tools.json")) as f:
    tools = json.load(f)
check(all(r["tools"] == tools for r in train + held_values + held_phrasings),
      "a row's tools differ from docs/reference-model/tools.json")

train_values = {value(r) for r in train if r["answers"]}
for name, held in (("heldout-values", held_values), ("heldout-phrasings", held_phrasings)):
    for r in held:
        v = value(r)
        check(v is None or v not in train_values, "%s: value %r is also a training value" % (name, v))
        check(v is None or str(v) in r["query"], "%s: value %r is not in its query" % (name, v))

TRAIN_TEMPLATES = (tool_call_data.WEATHER_TRAIN + tool_call_data.TIMER_TRAIN + tool_call_data.PACKAGE_TRAIN +
                   tool_call_data.OTHER_TRAIN)


def is_training_phrasing(row):
    return any(template_regex(t, value(row)).match(row["query"]) for t in TRAIN_TEMPLATES)


# Every training query is a dressed training template (so the check below can fail).
check(all(is_training_phrasing(r) for r in train[:300] + held_values),
      "a training query that no training template explains")
for r in held_phrasings:
    check(not is_training_phrasing(r),
          "held-out phrasing %r matches a training phrasing" % r["query"])
check({r["query"] for r in held_phrasings}.isdisjoint({r["query"] for r in train}),
      "a held-out phrasing's query is also a training query")

shards = sorted(k for k in first if k.startswith("pretrain/"))
check(len(shards) >= 1, "no pre-training shards")
for k in shards:
    data = first[k]
    check(len(data) < 1 << 20, "%s: over 1 MiB" % k)
    check(int(hashlib.sha256(data).hexdigest()[:16], 16) % 20 != 0, "%s: the corpus would hold it out" % k)
text = first[shards[0]].decode()
prompt, target = render_oracle.render(train[0])
check(text.startswith(prompt + target + "\n"),
      "the first pre-training turn is not the official rendering:\n%r\n%r" % (text[:600], prompt + target))
check(all(r["query"] in "".join(first[k].decode() for k in shards) for r in train),
      "a training example is missing from the pre-training text")

# An output name taken by something that is not a regular file is refused, never replaced.
with tempfile.TemporaryDirectory() as d:
    os.mkdir(os.path.join(d, "train.jsonl"))
    r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "docs", "reference-model", "tool_call_data.py"),
                        d, "--train", "100"], capture_output=True, text=True)
    check(r.returncode == 2, "a directory named train.jsonl: exit %d, not 2" % r.returncode)
    check(r.stderr.count("\n") == 1 and "train.jsonl: exists and is not a regular file" in r.stderr,
          "a directory named train.jsonl: not one line naming it: %r" % r.stderr)
    check(os.path.isdir(os.path.join(d, "train.jsonl")), "the directory named train.jsonl was replaced")

# A file beside an output with the temporary-looking name is left as it was.
with tempfile.TemporaryDirectory() as d:
    keep = os.path.join(d, "train.jsonl.tmp")
    with open(keep, "w") as f:
        f.write("a user's file")
    r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "docs", "reference-model", "tool_call_data.py"),
                        d, "--train", "100"], capture_output=True, text=True)
    check(r.returncode == 0, "with train.jsonl.tmp beside it: exit %d: %s" % (r.returncode, r.stderr))
    kept = open(keep).read() if os.path.isfile(keep) else None
    check(kept == "a user's file", "train.jsonl.tmp was overwritten or removed")
    check(oct(os.stat(os.path.join(d, "train.jsonl")).st_mode & 0o777) == oct(0o666 & ~UMASK),
          "train.jsonl does not have the umask's mode")
    check(not [n for n in os.listdir(d) if n.endswith(".tmp") and n != "train.jsonl.tmp"],
          "a temporary file was left: %s" % os.listdir(d))

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
