"""Independent oracle for train/finetune_data: the official needle fine-tuning reader,
renderer and encoder (needle/model/finetune.py: read_examples, from_chat, render_example,
_encode, fit_max_len) re-implemented with libsentencepiece and Python's json.

  render_oracle.py DATA.jsonl TOKENIZER.model CAP MAX_LEN... -> JSON on stdout:
  {"skipped": n, "fit": fit_max_len(CAP), "examples": [{"line", "prompt", "target",
   "encoded": {MAX_LEN: {"ids", "mask"}}}]}
"""
import json
import sys

import sentencepiece

PAD_ID, EOS_ID, BOS_ID = 0, 1, 2
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK_START, THINK_END = "<think>", "</think>"
TOOLS_START, TOOLS_END = "<tools>", "</tools>"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(example):
    tools = example.get("tools", [])
    tools_json = tools if isinstance(tools, str) else compact(tools)
    answers = example.get("answers", example.get("function_calls", []))
    answers_json = answers if isinstance(answers, str) else compact(answers)
    reasoning = (example.get("reasoning") or "").strip()
    system = (example.get("system") or "").strip()
    prefix = IM_START + "system\n" + system + IM_END + "\n" if system else ""
    prompt = (prefix + IM_START + "user\n" + TOOLS_START + tools_json + TOOLS_END + "\n"
              + example["query"] + IM_END + "\n" + IM_START + "assistant\n")
    think = THINK_START + "\n" + reasoning + "\n" + THINK_END + "\n" if reasoning else ""
    return prompt, think + TOOL_CALL_START + answers_json + TOOL_CALL_END + IM_END


def chat(example):
    messages = example.get("messages")
    if not isinstance(messages, list) or "query" in example:
        return None
    turns = [m for m in messages if m.get("role") != "system"]
    if len(turns) != 2 or turns[0].get("role") != "user" or turns[1].get("role") != "assistant":
        return None
    answers = []
    for call in turns[1].get("tool_calls") or []:
        function = call.get("function") or call
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            arguments = json.loads(arguments) if arguments.strip() else {}
        answers.append({"name": function.get("name"), "arguments": arguments})
    tools = [t.get("function", t) if isinstance(t, dict) else t for t in example.get("tools") or []]
    out = {"query": turns[0].get("content") or "", "tools": tools, "answers": answers}
    system = [m.get("content") for m in messages if m.get("role") == "system"]
    if system and system[0]:
        out["system"] = system[0]
    return out


def main():
    path, model, cap, max_lens = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    skipped, examples, longest = 0, [], 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            example = json.loads(line)
            if "query" not in example:
                example = chat(example)
            if example is None:
                skipped += 1
                continue
            prompt, target = render(example)
            p, t = sp.encode(prompt), sp.encode(target)
            longest = max(longest, len(p) + len(t) + 2)
            encoded = {}
            for m in max_lens:
                m = int(m)
                ids = ([BOS_ID] + p + t + [EOS_ID])[:m]
                mask = ([0.0] * (1 + len(p)) + [1.0] * (len(t) + 1))[:m]
                encoded[str(m)] = {"ids": ids + [PAD_ID] * (m - len(ids)),
                                   "mask": mask + [0.0] * (m - len(mask))}
            examples.append({"line": number, "prompt": prompt, "target": target,
                             "encoded": encoded})
    bucket = 128
    while bucket < min(longest, cap):
        bucket *= 2
    json.dump({"skipped": skipped, "fit": min(bucket, cap), "examples": examples},
              sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
