#!/usr/bin/python3
"""Writes tool_calls.jsonl: a small fine-tuning set in the official JSONL format (query, tools,
answers) for the LoRA demonstration of docs/quality.md. Deterministic (seed 0): three tools,
templated queries, one call each, a few refusals (answers []).
Usage: /usr/bin/python3 make_tool_calls.py > tool_calls.jsonl"""
import json, random

TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "set_timer", "description": "Start a timer",
     "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}},
    {"name": "find_package", "description": "Look up a Debian package",
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
]
CITIES = ["Paris", "Berlin", "Oslo", "Lima", "Tokyo", "Cairo", "Dublin", "Madrid", "Quito", "Perth",
          "Vienna", "Lagos", "Seoul", "Austin", "Zurich", "Nairobi"]
PACKAGES = ["zstd", "cmake", "groff", "libtorch", "openssl", "python3", "gcc", "vim", "curl", "bash",
            "coreutils", "tar", "gzip", "make", "git", "sed"]
WEATHER = ["What is the weather in {}?", "How warm is it in {} today?", "Weather for {} please",
           "Is it raining in {}?"]
TIMER = ["Set a timer for {} minutes", "Start a {} minute timer", "Remind me in {} minutes",
         "Timer: {} minutes"]
PACKAGE = ["Find the package {}", "Which Debian package is {}?", "Look up {} in Debian",
           "Show me the {} package"]
OTHER = ["Tell me a joke", "Who wrote the GPL?", "Thanks, that is all", "What does free software mean?"]

def main():
    rng = random.Random(0)
    for i in range(320):
        kind = rng.choice(["weather", "timer", "package", "weather", "timer", "package", "other"])
        if kind == "weather":
            c = rng.choice(CITIES)
            q, a = rng.choice(WEATHER).format(c), [{"name": "get_weather", "arguments": {"city": c}}]
        elif kind == "timer":
            m = rng.randint(1, 90)
            q, a = rng.choice(TIMER).format(m), [{"name": "set_timer", "arguments": {"minutes": m}}]
        elif kind == "package":
            p = rng.choice(PACKAGES)
            q, a = rng.choice(PACKAGE).format(p), [{"name": "find_package", "arguments": {"name": p}}]
        else:
            q, a = rng.choice(OTHER), []
        print(json.dumps({"query": q, "tools": TOOLS, "answers": a}))

if __name__ == "__main__":
    main()
