#!/usr/bin/python3
"""Greedy English continuations of held-out prompts: no token may repeat more than MAX_RUN
times in a row in the first N generated tokens.

Each line of PROMPTS is one prompt (a held-out sentence cut mid-sentence). Runs
`cact-run MODEL -p PROMPT -n N --json` for each (greedy), prints the continuation and the
longest run of one token, and exits 1 when any run exceeds MAX_RUN (2 on bad input).
Usage: /usr/bin/python3 check_english.py CACT_RUN MODEL PROMPTS [-n 48] [--max-run 4] [--path P]"""
import argparse, json, subprocess, sys


def longest_run(ids):
    best, run = 0, 0
    for i, t in enumerate(ids):
        run = run + 1 if i and ids[i - 1] == t else 1
        best = max(best, run)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cact_run")
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--max-run", type=int, default=4)
    ap.add_argument("--path", default="ref")
    a = ap.parse_args()
    with open(a.prompts, encoding="utf-8") as f:
        prompts = [l.rstrip("\n") for l in f if l.strip()]
    if not prompts:
        print("check_english: %s: no prompts" % a.prompts, file=sys.stderr)
        return 2
    failed = 0
    for i, p in enumerate(prompts, 1):
        r = subprocess.run([a.cact_run, a.model, "-p", p, "-n", str(a.n), "--path", a.path, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("check_english: prompt %d: cact-run exited %d: %s" % (i, r.returncode, r.stderr.strip()),
                  file=sys.stderr)
            return 2
        out = json.loads(r.stdout)
        ids = out["generated_ids"]
        run = longest_run(ids)
        bad = run > a.max_run or len(ids) != a.n
        failed += bad
        print("%2d %s run %d | %s|%s" % (i, "FAIL" if bad else "ok  ", run, p, out["text"].replace("\n", "\\n")))
    print("%d of %d prompts repeat a token more than %d times in a row in %d greedy tokens"
          % (failed, len(prompts), a.max_run, a.n))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
