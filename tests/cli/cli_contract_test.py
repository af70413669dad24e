#!/usr/bin/python3
"""The command-line contract of docs/cact-common.md, checked on every subcommand of the four
tools from one table: help (exit 0, the program's name in the usage line, an example,
defaults shown), one-line errors (`TOOL: message`, exit 2, nothing on stdout), `--json`
where a command prints a report, values refused at parse time with the reason, limits
refused against the model, outputs that are inputs refused, and a failed standard output.

usage: cli_contract_test.py BIN_DIR FIXTURES_DIR [TOOL,TOOL,...]  (default: all four)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN, FIXTURES = sys.argv[1], sys.argv[2]
TOOLS = (sys.argv[3] if len(sys.argv) > 3 else
         "cact-inspect,cact-quant,cact-run,cact-torch").split(",")
MODEL = os.path.join(FIXTURES, "tiny", "model.cact")
WEIGHTS = os.path.join(FIXTURES, "tiny", "weights.safetensors")

# (tool, subcommand or "", prints a report that has a --json form)
COMMANDS = [
    ("cact-inspect", "", False),  # `cact-inspect FILE` is `info`, whose help has --json
    ("cact-inspect", "info", True),
    ("cact-inspect", "verify", True), ("cact-inspect", "diff", True),
    ("cact-inspect", "dump", False),  # writes a .npy; its one stderr line is a receipt
    ("cact-inspect", "tokens", True),
    ("cact-quant", "", False), ("cact-quant", "codebook", True), ("cact-quant", "build", True),
    ("cact-quant", "requant", True), ("cact-quant", "presets", True), ("cact-quant", "lora", True),
    ("cact-quant", "synth", True), ("cact-quant", "dequant", True),
    ("cact-quant", "convert", True),
    ("cact-run", "", True), ("cact-run", "bench", True), ("cact-run", "perplexity", True),
    ("cact-run", "compare", True), ("cact-run", "eval", True),
    ("cact-torch", "", False), ("cact-torch", "export", False), ("cact-torch", "import", True),
    ("cact-torch", "run", True), ("cact-torch", "info", True),
    ("cact-torch", "train", False),  # writes a model, a curve (TSV + SVG) and its report
    ("cact-torch", "finetune", False),  # writes a PEFT adapter directory
    ("cact-torch", "eval", True),
]
COMMANDS = [c for c in COMMANDS if c[0] in TOOLS]

# Bad values, each refused at parse time or as soon as the model is open: (arguments, what
# the one line must contain).
BAD_VALUES = [
    ("cact-run", [MODEL, "--temperature", "nan"], "--temperature: must be finite and >= 0"),
    ("cact-run", [MODEL, "--temperature=-1"], "--temperature: must be finite and >= 0"),
    ("cact-run", [MODEL, "--temperature", "inf"], "--temperature: must be finite"),
    ("cact-run", [MODEL, "--top-p", "nan"], "--top-p: must be finite and in [0, 1]"),
    ("cact-run", [MODEL, "--top-k=-5"], "--top-k: must be a whole number"),
    ("cact-run", [MODEL, "--seed=-1"], "--seed: must be a whole number"),
    ("cact-run", [MODEL, "--min-top1", "nan"], "--min-top1: must be finite and in [0, 1]"),
    ("cact-run", [MODEL, "--min-top1", "99"], "--min-top1: must be finite and in [0, 1]"),
    ("cact-run", [MODEL, "--max-rel-l2=-1"], "--max-rel-l2: must be finite and >= 0"),
    ("cact-run", [MODEL, "--max-kl", "nan"], "--max-kl: must be finite"),
    ("cact-run", [MODEL, "-t", "0"], "--threads: must be a whole number in [1, 256]"),
    ("cact-run", [MODEL, "--tokens", "2,5", "--window", "99999999"],
     "--window 99999999 is more than the model's max_seq_len"),
    ("cact-run", [MODEL, "--tokens", "2,5", "--sink", "5000"],
     "--sink 5000 is more than the model's max_seq_len"),
    ("cact-run", [MODEL, "--tokens", "2,5", "-n", "5000"], "-n 5000: the prompt's 2 tokens"),
    ("cact-run", [MODEL, "--tokens", "2,5", "--validate", "-n", "5000"], "-n (decode steps) 5000"),
    ("cact-run", ["bench", MODEL, "-r", "0"], "--reps: must be a whole number in [1, 1000]"),
    ("cact-run", ["bench", MODEL, "--window=-3"], "--window: must be a whole number"),
    ("cact-run", ["bench", MODEL, "-p", "8", "-n", "4", "-d", "99999", "-r", "1", "-t", "1",
                  "--arms", "ref", "--session", "0", "--tool-call", "0"],
     "-d 99999 with -n 4 needs"),
    ("cact-run", ["perplexity", MODEL, "-f", MODEL, "--ctx", "1"],
     "--ctx: must be a whole number in [2,"),
    ("cact-run", ["perplexity", MODEL, "-f", MODEL, "--ctx", "99999"], "--ctx 99999"),
    ("cact-run", ["eval", MODEL, "-f", "x.jsonl", "--limit=-1"], "--limit: must be a whole"),
    ("cact-quant", ["requant", MODEL, "--preset", "cq4", "--kv-window", "99999999", "-o", "x"],
     "--kv-window 99999999 is more than the model's max_seq_len"),
    ("cact-quant", ["requant", MODEL, "--preset", "cq4", "--kv-window", "0", "-o", "x"],
     "--kv-window: must be >= 1"),
    ("cact-quant", ["build", "--weights", WEIGHTS, "--base", MODEL, "--keep-tolerance", "nan",
                    "-o", "x"], "--keep-tolerance: must be finite"),
    ("cact-quant", ["lora", MODEL, "--adapter", "a", "--scale=-inf", "-o", "x"],
     "--scale: must be finite"),
    ("cact-inspect", ["verify", MODEL, "--sha256", "00"], "--sha256: must be 64 hexadecimal"),
    ("cact-inspect", ["verify", "/nonexistent/model.cact"], "no such file"),
    ("cact-torch", ["run", "m.pt", "--tokens", "1", "-r", "0"], "--repeat: must be a whole"),
    ("cact-torch", ["eval", "w.safetensors", "-f", "t", "--ctx", "1"], "--ctx: must be a whole"),
    ("cact-torch", ["train", "-o", "x", "--lr", "nan"], "--lr: must be finite"),
    ("cact-torch", ["finetune", MODEL, "--data", "d", "-o", "x", "--val-split", "2"],
     "--val-split: must be finite and in [0, 1]"),
]
BAD_VALUES = [b for b in BAD_VALUES if b[0] in TOOLS]

# Defaults the help must show: (tool, subcommand, option, default).
DEFAULTS = [
    ("cact-run", "", "--think-max", "64"), ("cact-run", "", "--top-tools", "8"),
    ("cact-run", "", "--max-rel-l2", "0.005"), ("cact-run", "", "--min-top1", "0.99"),
    ("cact-run", "", "--max-kl-mean", "0.01"), ("cact-run", "", "--max-kl", "0.1"),
    ("cact-run", "bench", "--prompt", "256"), ("cact-run", "bench", "--gen", "128"),
    ("cact-run", "bench", "--reps", "5"), ("cact-run", "bench", "--depth", "0,256,1024,2048"),
    ("cact-quant", "requant", "--zstd-level", "19"), ("cact-quant", "synth", "--seed", "1"),
    ("cact-quant", "synth", "--geometry", "needle2"),
]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(tool, args, stdout=subprocess.PIPE):
    return subprocess.run([os.path.join(BIN, tool)] + args, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300)


def program(tool, sub):
    return tool + (" " + sub if sub else "")


def help_text(tool, sub):
    r = run(tool, ([sub] if sub else []) + ["--help"])
    return r


def option_line(text, option):
    """The help lines of `option` (its description may wrap onto the next lines)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"(^|[ ,])" + re.escape(option) + r"\b", line.strip()):
            return " ".join(lines[i:i + 3])
    return ""


with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    for tool, sub, has_json in COMMANDS:
        name = program(tool, sub)
        h = help_text(tool, sub)
        check(h.returncode == 0, f"{name} --help: exit {h.returncode}")
        check(f"Usage: {name} " in h.stdout or f"Usage: {name}\n" in h.stdout,
              f"{name} --help: the usage line does not name '{name}': "
              f"{h.stdout.splitlines()[:2]}")
        check(BIN not in h.stdout, f"{name} --help: shows a path")
        check(re.search(r"Examples?:\n  " + re.escape(tool), h.stdout) is not None,
              f"{name} --help: no example")
        check(("--json" in h.stdout) == has_json or not has_json,
              f"{name}: prints a report but has no --json")
        if has_json:
            check("--json" in h.stdout, f"{name}: prints a report but has no --json")
        # A flag that does not exist: one line, the tool's name, exit 2, nothing on stdout.
        r = run(tool, ([sub] if sub else []) + ["--no-such-flag"])
        err = r.stderr.splitlines()
        check(r.returncode == 2, f"{name} --no-such-flag: exit {r.returncode}")
        check(len(err) == 1 and err[0].startswith(tool + ": "),
              f"{name} --no-such-flag: stderr is not one '{tool}: ' line: {err}")
        check(r.stdout == "", f"{name} --no-such-flag: wrote to stdout: {r.stdout[:200]!r}")
        # (`cact-inspect FILE` is `cact-inspect info FILE`: its errors point at info's help.)
        check(re.search("'" + re.escape(name) + r"( info)? --help'", r.stderr) is not None,
              f"{name}: the error does not point at --help: {r.stderr!r}")

    for tool in TOOLS:
        v = run(tool, ["--version"])
        check(v.returncode == 0 and len(v.stdout.splitlines()) == 1 and
              v.stdout.startswith(tool + " "), f"{tool} --version: {v.returncode} {v.stdout!r}")

    for tool, args, want in BAD_VALUES:
        r = run(tool, args)
        err = r.stderr.splitlines()
        what = f"{tool} {' '.join(args)}"
        check(r.returncode == 2, f"{what}: exit {r.returncode} (stderr {err})")
        check(len(err) == 1 and err[0].startswith(tool + ": ") and want in err[0],
              f"{what}: stderr is not one '{tool}: ...{want}...' line: {err}")
        check(not os.path.exists("x"), f"{what}: wrote its output")

    for tool, sub, option, default in DEFAULTS:
        line = option_line(help_text(tool, sub).stdout, option)
        check(re.search(r"=" + re.escape(default) + r"(\s|$)|default:? " + re.escape(default),
                        line) is not None,
              f"{program(tool, sub)} --help: {option} does not show its default {default}: "
              f"{line!r}")

    # Outputs that are inputs are refused before any work, the input untouched.
    model = os.path.join(tmp, "m.cact")
    shutil.copy(MODEL, model)
    os.link(model, os.path.join(tmp, "hard.cact"))
    os.symlink(model, os.path.join(tmp, "soft.cact"))
    before = open(model, "rb").read()
    for out in (model, os.path.join(tmp, "hard.cact"), os.path.join(tmp, "soft.cact")):
        for tool, args in [
                ("cact-quant", ["dequant", model, "-o", out]),
                ("cact-quant", ["requant", model, "--preset", "cq4", "-q", "-o", out]),
                ("cact-inspect", ["dump", model, "--tensor", "embedding", "-o", out]),
                ("cact-run", [model, "--tokens", "2,5", "--logits", out]),
                ("cact-torch", ["export", model, "-o", out])]:
            if tool not in TOOLS:
                continue
            r = run(tool, args)
            err = r.stderr.splitlines()
            what = f"{tool} {' '.join(args)}"
            check(r.returncode == 2, f"{what}: exit {r.returncode}")
            check(len(err) == 1 and "is an input of this command" in err[0],
                  f"{what}: not refused as an input: {err}")
            check(open(model, "rb").read() == before, f"{what}: the input changed")
    check(os.path.islink(os.path.join(tmp, "soft.cact")), "the symbolic link was replaced")

    # A failed standard output is an error, never a silent exit 0.
    with open("/dev/full", "w") as full:
        for tool, args in [("cact-inspect", [MODEL]), ("cact-quant", ["presets"]),
                           ("cact-run", [MODEL, "--tokens", "2,5", "--json"]),
                           ("cact-torch", ["info"])]:
            if tool not in TOOLS:
                continue
            r = run(tool, args, stdout=full)
            check(r.returncode == 2 and "standard output: write failed" in r.stderr,
                  f"{tool} {' '.join(args)} > /dev/full: exit {r.returncode}, {r.stderr!r}")

for f in failures:
    print("FAIL", f)
print(f"cli contract: {len(COMMANDS)} commands, {len(BAD_VALUES)} bad values, "
      f"{len(DEFAULTS)} defaults; {len(failures)} failures")
sys.exit(1 if failures else 0)
