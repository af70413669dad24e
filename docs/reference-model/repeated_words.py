#!/usr/bin/python3
"""Lines of random words, each line's words then the same words again: predicting the second
half takes copying from the context (an induction head), since nothing else predicts it.

  /usr/bin/python3 repeated_words.py OUT.txt SEED BYTES [--ids TOKENIZER.model]
  /usr/bin/python3 repeated_words.py OUT_DIR SEED BYTES --shards

Words: 3-9 random lower-case letters (a fifth of them capitalised) or a number 1-9999;
2-24 words per half. With --ids a half is instead 8-48 random token ids (13-511) decoded with
the tokenizer, and the halves are joined by " | ". Written beside OUT, then renamed over it.
With --shards the lines go to OUT_DIR/00.txt, 01.txt, ... instead: each past 600 kB (under
the corpus reader's 1 MiB) and one the corpus split keeps for training, so the directory can
be given to `cact-torch train --corpus` without a line entering the held-out text."""
import random
import sys

import os

from tool_call_data import held_out_by_corpus, write_atomically

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def word(rng):
    r = rng.random()
    if r < 0.15:
        return str(rng.randint(1, 9999))
    w = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9)))
    return w.capitalize() if r < 0.35 else w


def write_shards(out_dir, lines):
    """Lines into out_dir/NN.txt, each shard past 600 kB and kept by the corpus split (a
    shard the split would hold out takes the next line too; the last one may end short)."""
    os.makedirs(out_dir, exist_ok=True)
    shard, n = "", 0
    for i, line in enumerate(lines):
        shard += line + "\n"
        if (len(shard.encode()) > 600_000 or i == len(lines) - 1) and not held_out_by_corpus(shard):
            write_atomically(os.path.join(out_dir, "%02d.txt" % n), shard)
            shard, n = "", n + 1
    if shard:  # the split holds out every ending of the tail: leave it out
        print("repeated_words: %d bytes at the end left out (held out by the corpus split)"
              % len(shard.encode()), file=sys.stderr)


def main():
    shards = len(sys.argv) == 5 and sys.argv[4] == "--shards"
    if len(sys.argv) not in (4, 5, 6) or (len(sys.argv) == 5 and not shards) or (
            len(sys.argv) == 6 and sys.argv[4] != "--ids"):
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    try:
        seed, size = int(sys.argv[2]), int(sys.argv[3])
    except ValueError:
        print("repeated_words: SEED and BYTES must be integers, got %r %r" % tuple(sys.argv[2:4]),
              file=sys.stderr)
        return 2
    sp = None
    if len(sys.argv) == 6:
        import sentencepiece
        try:
            sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[5])
        except (OSError, RuntimeError) as e:
            print("repeated_words: %s: cannot load the tokenizer: %s" % (sys.argv[5], e),
                  file=sys.stderr)
            return 2
    rng = random.Random(seed)
    lines, n = [], 0
    while n < size:
        if sp:
            ids = [rng.randint(13, 511) for _ in range(rng.randint(8, 48))]
            half = sp.decode(ids).replace("\n", " ").strip()
            lines.append(half + " | " + half)
        else:
            half = " ".join(word(rng) for _ in range(rng.randint(2, 24)))
            lines.append(half + ". " + half + ".")
        n += len(lines[-1]) + 1
    try:
        if shards:
            write_shards(out, lines)
        else:
            write_atomically(out, "\n".join(lines) + "\n")
    except OSError as e:
        print("repeated_words: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
