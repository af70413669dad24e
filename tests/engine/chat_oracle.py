#!/usr/bin/python3
"""Oracle for the chat-template test: the official render_example prompt (compact JSON,
stripped optional system turn) encoded by libsentencepiece with BOS in front.

usage: chat_oracle.py MODEL TOOLS.json QUERY.txt SYSTEM.txt|- OUT.json
"""
import json
import sys

import sentencepiece as spm

model, tools_path, query_path, system_path, out = sys.argv[1:6]
sp = spm.SentencePieceProcessor(model_file=model)
tools = json.load(open(tools_path, encoding='utf-8'))
query = open(query_path, encoding='utf-8').read()
system = '' if system_path == '-' else open(system_path, encoding='utf-8').read().strip()
tools_json = json.dumps(tools, separators=(',', ':'), ensure_ascii=False)
prefix = ('<|im_start|>system\n' + system + '<|im_end|>\n' if system else '')
prefix += '<|im_start|>user\n<tools>' + tools_json + '</tools>'
text = prefix + '\n' + query + '<|im_end|>\n<|im_start|>assistant\n'
json.dump({'text': text, 'ids': [2] + sp.encode(text), 'tools_prefix': 1 + len(sp.encode(prefix))},
          open(out, 'w', encoding='utf-8'), ensure_ascii=False)
