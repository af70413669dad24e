#!/usr/bin/python3
"""Independent oracle for the tool-retrieval test: the tokenizer and Okapi BM25 written from
the rules in engine/toolcall/tool_retrieval.h with regular expressions and collections.Counter.

usage: bm25_oracle.py CATALOG.json OUT.json
OUT: {"terms": {text: [term...]}, "queries": [{"query", "scores" (declaration order),
"ranking" (tool indices best first)}]}
"""
import collections
import json
import math
import re
import sys

K1, B = 1.2, 0.75
WORD = re.compile(rb'[A-Za-z0-9\x80-\xff]+')
CAMEL = re.compile(rb'(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])')


def terms(text):
    out = []
    for word in WORD.findall(text.encode('utf-8')):
        out += [part.lower().decode('utf-8') for part in CAMEL.split(word) if part]
    return out


def bm25(query, docs):
    n_docs = len(docs)
    counts = [collections.Counter(d) for d in docs]
    df = collections.Counter(t for c in counts for t in c)
    avgdl = sum(len(d) for d in docs) / n_docs
    scores = []
    for doc, c in zip(docs, counts):
        s = 0.0
        for q in terms(query):
            if c[q] == 0:
                continue
            idf = math.log(1 + (n_docs - df[q] + 0.5) / (df[q] + 0.5))
            s += idf * c[q] * (K1 + 1) / (c[q] + K1 * (1 - B + B * len(doc) / avgdl))
        scores.append(s)
    return scores


catalog = json.load(open(sys.argv[1], encoding='utf-8'))
tools = catalog['tools']
docs = [terms(t['name']) + terms(t['description']) for t in tools]
texts = catalog['term_cases'] + catalog['queries'] + [t['name'] for t in tools] + \
    [t['description'] for t in tools]
result = {'terms': {t: terms(t) for t in texts}, 'queries': []}
for q in catalog['queries']:
    scores = bm25(q, docs)
    ranking = sorted(range(len(tools)), key=lambda i: (-scores[i], i))
    result['queries'].append({'query': q, 'scores': scores, 'ranking': ranking})
json.dump(result, open(sys.argv[2], 'w', encoding='utf-8'), ensure_ascii=False)
