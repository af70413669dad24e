#!/usr/bin/python3
"""Data for a LoRA fine-tune that teaches the tool-calling model a fourth tool,
get_stock_price(symbol), declared after the three of tools.json.

Writes into OUT_DIR (deterministic for a seed), every row declaring the four tools:
  train.jsonl           fine-tuning JSONL: stock queries, and the three tools' training rows
                        (tool_call_data.py's phrasings and values) so they are not forgotten
  heldout-stock.jsonl   stock queries with symbols never used in training, half of them in
                        phrasings never used in training
  heldout-three.jsonl   the three tools and off-topic queries on held-out values (as
                        tool_call_data.py's heldout-values.jsonl), with the fourth declared
Symbols are made up (3-5 capitals), so a right answer copies the symbol from the query.
Usage: /usr/bin/python3 fourth_tool_data.py OUT_DIR [--train N] [--heldout N] [--seed S]"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tool_call_data as tc  # noqa: E402

STOCK_TOOL = {
    "name": "get_stock_price",
    "description": "Latest price of a stock by its ticker symbol",
    "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}},
                   "required": ["symbol"]},
}
STOCK_TRAIN = [
    "What is the stock price of {}?", "How much is {} stock?", "Price of {} shares",
    "Get the share price for {}", "Check the stock {}", "How is {} trading?", "{} stock price",
    "Look up the ticker {}", "What's {} trading at?", "Quote for {}", "Show me the price of {}",
    "How much does a share of {} cost?", "Stock quote {}", "Give me the latest price for {}",
    "What is {} worth today?", "Fetch the price of ticker {}", "Current price of {}?",
    "Is {} up today?", "Tell me the {} share price", "Ticker {} price please",
]
STOCK_HELDOUT = [
    "I'd like a quote on {} shares.", "Where is {} trading right now?", "Pull the latest {} price",
    "What are {} shares going for?", "Price check on the {} ticker",
]


def symbol(rng):
    while True:
        s = tc.synthetic_name(rng, False).upper()[:rng.randint(3, 5)]
        if len(s) >= 3:
            return s


def stock_row(rng, tools, phrasings, symbols, dressed):
    v = rng.choice(symbols)
    q = rng.choice(phrasings).format(v)
    if dressed:
        q = tc.dress(rng, q, v)
    return {"query": q, "tools": tools,
            "answers": [{"name": "get_stock_price", "arguments": {"symbol": v}}]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=1200)
    ap.add_argument("--heldout", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with open(os.path.join(tc.HERE, "tools.json")) as f:
        tools = json.load(f) + [STOCK_TOOL]
    rng = random.Random(a.seed)
    symbols = sorted({symbol(rng) for _ in range(600)})
    train_symbols = [s for s in symbols if not tc.is_heldout(s, 6)]
    held_symbols = [s for s in symbols if tc.is_heldout(s, 6)]
    vals = tc.values(rng)
    train_vals = {k: v[0] for k, v in vals.items()}
    held_vals = {k: v[1] for k, v in vals.items()}
    train_p = {"weather": tc.WEATHER_TRAIN, "timer": tc.TIMER_TRAIN, "package": tc.PACKAGE_TRAIN,
               "other": tc.OTHER_TRAIN}
    kinds = ["weather", "timer", "package"] * 3 + ["other"] * 2
    train = []
    for _ in range(a.train):
        if rng.randrange(5) < 2:
            train.append(stock_row(rng, tools, STOCK_TRAIN, train_symbols, True))
        else:
            train.append(tc.example(rng, tools, rng.choice(kinds), train_p, train_vals, True, True))
    stock = [stock_row(rng, tools, STOCK_HELDOUT if i % 2 else STOCK_TRAIN, held_symbols, False)
             for i in range(a.heldout)]
    three = [tc.example(rng, tools, rng.choice(kinds), train_p, held_vals, True)
             for _ in range(a.heldout)]
    os.makedirs(a.out, exist_ok=True)
    for name, rows in (("train.jsonl", train), ("heldout-stock.jsonl", stock),
                       ("heldout-three.jsonl", three)):
        tc.write_atomically(os.path.join(a.out, name),
                            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print("symbols: %d for training, %d held out; wrote %d training rows, %d + %d held out" %
          (len(train_symbols), len(held_symbols), len(train), len(stock), len(three)))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print("fourth_tool_data: %s" % e, file=sys.stderr)
        sys.exit(2)
