#!/usr/bin/python3
"""The committed tool-calling model makes right calls on values it never saw in training:
`cact-run eval` (grammar on, greedy, the fast path, one and two threads) on the held-out-value
file that docs/reference-model/tool_call_data.py writes with the model's recipe, against the
figures docs/reference-model/tool-call-training.md reports (every answer valid, every
off-topic query refused, exact calls at least 85 %: 89.5 % measured), and the same results on
both thread counts. Usage: tool_call_model_test.py CACT_RUN SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    cact_run, src = sys.argv[1], sys.argv[2]
    ref = os.path.join(src, "docs", "reference-model")
    model = os.path.join(ref, "toolcall.cact")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ in the source tree
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["/usr/bin/python3", os.path.join(ref, "tool_call_data.py"), tmp,
                            "--train", "40000", "--seed", "0"], capture_output=True, text=True,
                           env=env)
        assert r.returncode == 0, r.stderr
        results = []
        for threads in ("1", "2"):
            r = subprocess.run([cact_run, "eval", model, "-f",
                                os.path.join(tmp, "heldout-values.jsonl"), "--json", "-q", "-t",
                                threads], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            results.append(json.loads(r.stdout)["models"][0])
    totals = results[0]["totals"]
    rate = lambda k: totals[k]["rate"]
    print("exact %.3f, valid %.3f, refusals right %.3f, right tools %.3f" % (
        rate("exact"), rate("valid"), rate("refusals_right"), rate("names_right")))
    assert totals["examples"] == 200, totals["examples"]
    assert rate("valid") == 1.0, totals["valid"]
    assert rate("refusals_right") == 1.0 and totals["refusals_right"]["total"] > 10, \
        totals["refusals_right"]
    assert rate("exact") >= 0.85, totals["exact"]
    got = [[e["got"] for e in r["per_example"]] for r in results]
    assert got[0] == got[1], "one and two threads answer differently"
    return 0


if __name__ == "__main__":
    sys.exit(main())
