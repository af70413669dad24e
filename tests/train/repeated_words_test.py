#!/usr/bin/python3
"""docs/reference-model/repeated_words.py: every line is a half and the same half again; the
same seed writes the same bytes; --shards splits exactly those lines into shards under the
corpus reader's 1 MiB that the corpus split keeps for training; bad arguments exit 2.
Usage: repeated_words_test.py SOURCE_DIR"""
import hashlib
import os
import subprocess
import sys
import tempfile


def held_out_by_corpus(text):
    """train/corpus.h's rule, restated: the first 8 bytes of the SHA-256, big-endian, 0 mod 20."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % 20 == 0


def main():
    script = os.path.join(sys.argv[1], "docs", "reference-model", "repeated_words.py")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ in the source tree
    run = lambda *a: subprocess.run(["/usr/bin/python3", script, *a], capture_output=True,
                                    text=True, env=env)
    with tempfile.TemporaryDirectory() as tmp:
        one, again = os.path.join(tmp, "one.txt"), os.path.join(tmp, "again.txt")
        for out in (one, again):
            r = run(out, "7", "1500000")
            assert r.returncode == 0, r.stderr
        text = open(one, encoding="utf-8").read()
        assert text == open(again, encoding="utf-8").read(), "not deterministic"
        lines = text.splitlines()
        assert len(text.encode()) >= 1_500_000 and len(lines) > 1000, len(text)
        for line in lines:
            half = line[:len(line) // 2]
            assert line == half + " " + half, line  # "words. words."

        shards = os.path.join(tmp, "shards")
        r = run(shards, "7", "1500000", "--shards")
        assert r.returncode == 0, r.stderr
        names = sorted(os.listdir(shards))
        assert names == ["%02d.txt" % i for i in range(len(names))] and len(names) >= 3, names
        joined = ""
        for name in names:
            shard = open(os.path.join(shards, name), encoding="utf-8").read()
            assert len(shard.encode()) < 1 << 20, (name, len(shard.encode()))
            assert not held_out_by_corpus(shard), name
            joined += shard
        # the shards hold the same lines in order, less any tail the split would hold out
        assert text.startswith(joined) and len(joined) > 0.9 * len(text), (len(joined), len(text))

        for bad in (["x"], [one, "a", "10"], [one, "1", "10", "--shard"],
                    [one, "1", "10", "--ids"]):
            r = run(*bad)
            assert r.returncode == 2, (bad, r.returncode, r.stderr)
            assert r.stderr.strip(), bad
    print("repeated_words: lines, determinism, shards and bad arguments checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
