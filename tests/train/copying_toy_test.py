#!/usr/bin/python3
"""docs/reference-model/copying_toy.py: its data marks exactly the predictable copied
targets (each span's copy after its first token), a tiny run prints the documented line
every 50 steps with finite losses and is deterministic, and bad arguments exit 2 with a
line. Usage: copying_toy_test.py SOURCE_DIR"""
import math
import os
import re
import subprocess
import sys

import numpy as np


def main():
    src = sys.argv[1]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(src, "docs", "reference-model"))
    import copying_toy

    # The mask: every target marked copied equals the token one span-length earlier in the
    # sequence, and exactly the copies' tokens after their first are marked.
    x, copied = copying_toy.batch(np.random.default_rng(5), 3, 200)
    x, copied = x.numpy(), copied.numpy()
    assert x.shape == (3, 201) and copied.shape == (3, 200), (x.shape, copied.shape)
    for row, mask in zip(x, copied):
        pos, spans = 0, 0
        while True:  # each whole span and its copy; the cut-off last one is not checked
            n = next((k for k in range(8, 32) if pos + 2 * k <= 201 and
                      list(row[pos:pos + k]) == list(row[pos + k:pos + 2 * k])), 0)
            if n == 0:
                break
            # targets t predict row[t + 1]: marked exactly for the copy's tokens after its first
            want = [pos + n <= t + 1 < pos + 2 * n and t + 1 != pos + n
                    for t in range(pos - 1, pos + 2 * n - 1) if 0 <= t < 200]
            got = [bool(mask[t]) for t in range(pos - 1, pos + 2 * n - 1) if 0 <= t < 200]
            assert got == want, (pos, n)
            pos, spans = pos + 2 * n, spans + 1
        assert spans >= 3, spans

    script = os.path.join(src, "docs", "reference-model", "copying_toy.py")
    run = lambda *a: subprocess.run(["/usr/bin/python3", script, *a], capture_output=True,
                                     text=True, timeout=300)
    outs = []
    for _ in range(2):
        r = run("2", "64", "1e-3", "100", "16", "1")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == 2, r.stdout
        for step, line in zip((50, 100), lines):
            m = re.fullmatch(r"(\d+) all (\S+) copy (\S+) first (\S+) \d+s", line)
            assert m and int(m.group(1)) == step, line
            assert all(math.isfinite(float(m.group(i))) for i in (2, 3, 4)), line
        outs.append([l.rsplit(" ", 1)[0] for l in lines])  # without the seconds
    assert outs[0] == outs[1], outs

    # (each with one bad argument: too few, batch 0, a learning rate that is no number, a
    # width that 4 heads do not divide, T under 32)
    for bad in (["1", "2"], ["0", "64", "1e-3", "10", "16", "1"], ["2", "64", "x", "10", "16", "1"],
                ["2", "64", "1e-3", "10", "18", "1"], ["2", "31", "1e-3", "10", "16", "1"]):
        r = run(*bad)
        assert r.returncode == 2 and r.stderr.strip() and not r.stdout, (bad, r)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
