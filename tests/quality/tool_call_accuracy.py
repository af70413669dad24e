#!/usr/bin/python3
"""Tool-call accuracy of a model on examples it was not trained on, with and without the
grammar: for each example, `cact-run MODEL --tools --query --json`, then the calls are
compared with the expected ones (names and arguments equal as JSON values).

The examples follow docs/reference-model/make_tool_calls.py (same three tools and query
templates) but use cities and packages that file never uses, so a right answer has to copy
the value from the query. Deterministic (seed 1).

usage: tool_call_accuracy.py CACT_RUN MODEL [-n 64] [--examples 60] [--json OUT]
"""
import argparse
import json
import random
import subprocess
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/docs/reference-model")
import make_tool_calls as train  # noqa: E402  (the training set's tools and templates)

NEW_CITIES = ["Lisbon", "Prague", "Hanoi", "Denver", "Accra", "Riga", "Bogota", "Kyoto"]
NEW_PACKAGES = ["htop", "rsync", "nginx", "emacs", "wget", "jq", "tmux", "sqlite3"]


def examples(count):
    rng = random.Random(1)
    out = []
    for _ in range(count):
        kind = rng.choice(["weather", "timer", "package", "other"])
        if kind == "weather":
            c = rng.choice(NEW_CITIES)
            out.append((rng.choice(train.WEATHER).format(c),
                        [{"name": "get_weather", "arguments": {"city": c}}]))
        elif kind == "timer":
            m = rng.randint(1, 90)
            out.append((rng.choice(train.TIMER).format(m),
                        [{"name": "set_timer", "arguments": {"minutes": m}}]))
        elif kind == "package":
            p = rng.choice(NEW_PACKAGES)
            out.append((rng.choice(train.PACKAGE).format(p),
                        [{"name": "find_package", "arguments": {"name": p}}]))
        else:
            out.append((rng.choice(train.OTHER), []))
    return out


def run(cact_run, model, tools_path, query, n, grammar):
    cmd = [cact_run, model, "--tools", tools_path, "--query", query, "-n", str(n), "--json"]
    if not grammar:
        cmd.append("--no-grammar")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"cact-run failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cact_run")
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--examples", type=int, default=60)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    tools_path = "/tmp/tool_call_accuracy_tools.json"
    with open(tools_path, "w", encoding="utf-8") as f:
        json.dump(train.TOOLS, f)
    rows = []
    report = {}
    for grammar in (True, False):
        valid = exact = names = 0
        ms = []
        cases = examples(a.examples)
        for i, (query, want) in enumerate(cases):
            t = time.time()
            r = run(a.cact_run, a.model, tools_path, query, a.n, grammar)
            ms.append(1e3 * (time.time() - t))
            got = r["tool_calls"] if r["valid"] else None
            valid += r["valid"]
            exact += got == want
            names += got is not None and [c["name"] for c in got] == [c["name"] for c in want]
            rows.append({"grammar": grammar, "query": query, "want": want, "got": got,
                         "text": r["text"]})
            print(f"\r{'grammar' if grammar else 'free   '} {i + 1}/{len(cases)}", end="",
                  file=sys.stderr, flush=True)
        print(file=sys.stderr)
        key = "grammar" if grammar else "free"
        report[key] = {"examples": len(cases), "valid": valid, "exact": exact,
                       "names": names, "mean_ms": sum(ms) / len(ms)}
    print("| decoding | examples | valid answers | right tools | exact calls |")
    print("|---|---:|---:|---:|---:|")
    for key in ("grammar", "free"):
        r = report[key]
        n = r["examples"]
        print(f"| {key} | {n} | {r['valid']} ({100 * r['valid'] / n:.0f} %) | "
              f"{r['names']} ({100 * r['names'] / n:.0f} %) | "
              f"{r['exact']} ({100 * r['exact'] / n:.0f} %) |")
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump({"report": report, "rows": rows}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
