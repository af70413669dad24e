"""docs/reference-model/fourth_tool_data.py: deterministic; every row declares the three tools
of tools.json and get_stock_price; held-out symbols never in training and copied in their
query; half the held-out stock queries in phrasings never used in training.

  fourth_tool_data_test.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

SOURCE = sys.argv[1]
SCRIPT = os.path.join(SOURCE, "docs", "reference-model", "fourth_tool_data.py")
sys.path.insert(0, os.path.join(SOURCE, "docs", "reference-model"))
import fourth_tool_data  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def generate(out):
    subprocess.run(["/usr/bin/python3", SCRIPT, out, "--train", "400", "--heldout", "60"],
                   check=True, capture_output=True,
                   env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    names = ("train.jsonl", "heldout-stock.jsonl", "heldout-three.jsonl")
    return {n: open(os.path.join(out, n), encoding="utf-8").read() for n in names}


with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    first, second = generate(a), generate(b)
check(first == second, "two runs with the same seed wrote different files")
rows = {k: [json.loads(l) for l in v.splitlines()] for k, v in first.items()}
check([len(rows[k]) for k in ("train.jsonl", "heldout-stock.jsonl", "heldout-three.jsonl")] ==
      [400, 60, 60], "row counts")

with open(os.path.join(SOURCE, "docs", "reference-model", "tools.json")) as f:
    tools = json.load(f) + [fourth_tool_data.STOCK_TOOL]
check(all(r["tools"] == tools for rs in rows.values() for r in rs),
      "a row does not declare the three tools and get_stock_price")

stock = lambda r: r["answers"] and r["answers"][0]["name"] == "get_stock_price"
symbol = lambda r: r["answers"][0]["arguments"]["symbol"]
train_stock = [r for r in rows["train.jsonl"] if stock(r)]
check(len(train_stock) > 100 and len(train_stock) < 300, "stock rows: %d of 400" % len(train_stock))
check(any(not stock(r) and r["answers"] for r in rows["train.jsonl"]),
      "no rows of the three tools in training")
train_symbols = {symbol(r) for r in train_stock}
for r in rows["heldout-stock.jsonl"]:
    check(stock(r), "a held-out stock row without the stock call: %r" % r)
    check(symbol(r) not in train_symbols, "held-out symbol %r is also a training symbol" % symbol(r))
    check(symbol(r) in r["query"], "symbol %r is not in its query %r" % (symbol(r), r["query"]))
held_phrasings = [r for r in rows["heldout-stock.jsonl"]
                  if any(r["query"] == p.format(symbol(r)) for p in fourth_tool_data.STOCK_HELDOUT)]
check(len(held_phrasings) == 30, "held-out phrasings: %d of 60" % len(held_phrasings))
check(not {r["query"] for r in held_phrasings} & {r["query"] for r in rows["train.jsonl"]},
      "a held-out phrasing's query is also a training query")

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
