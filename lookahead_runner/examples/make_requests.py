"""Writes the example request sets: requests/mixed.jsonl, three categories of prompt requests (code, chat,
summarise), each with its own max_tokens, and requests/chat.jsonl, the same requests as chat messages (a system
message, then the user's); written by the project (no downloaded data). Deterministic:

    python -m lookahead_runner.examples.make_requests    # rewrites requests/mixed.jsonl and requests/chat.jsonl

The category word stands in each prompt's first sentence, which is where the simulator looks for it when a
scenario sets an acceptance per category (--sim-set category_alpha=code:0.9,chat:0.5).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

PER_CATEGORY = 100
MAX_TOKENS = {"code": 192, "chat": 48, "summarise": 96}
NOUNS = ["queue", "cache", "parser", "invoice", "sensor", "playlist", "ledger", "garden", "route", "recipe",
         "ticket", "archive", "schedule", "budget", "inventory", "message", "report", "timer", "map", "library"]
VERBS = ["sorts", "merges", "validates", "counts", "filters", "groups", "renames", "compresses", "retries", "splits"]
TOPICS = ["the weather this weekend", "a good book to read", "learning to cook", "a trip to the mountains",
          "training for a first race", "keeping houseplants alive", "a new board game", "moving to a new city"]
FACTS = ["The meeting moved to Thursday", "Sales rose by four percent", "Two servers were replaced",
         "The team hired a designer", "Shipping costs went up", "The pilot ended early", "Customers asked for exports",
         "The roadmap slipped by a month", "A bug delayed the release", "The office closes in August"]


def code(rng: random.Random) -> str:
    noun, other = rng.sample(NOUNS, 2)
    steps = " ".join(f"It {rng.choice(VERBS)} each {rng.choice(NOUNS)} and keeps the {rng.choice(NOUNS)} intact."
                     for _ in range(rng.randint(2, 6)))
    return (f"Write Python code for a function that {rng.choice(VERBS)} a {noun} into a {other}. {steps} "
            "Return only the function with type hints and a docstring.")


def chat(rng: random.Random) -> str:
    return (f"Let's chat about {rng.choice(TOPICS)}. {rng.choice(['Any tips?', 'What would you do?', 'Be brief.'])}")


def summarise(rng: random.Random) -> str:
    body = " ".join(f"{rng.choice(FACTS)}, and the {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)}."
                    for _ in range(rng.randint(12, 30)))
    return f"Summarise this note in three bullet points. {body}"


def requests(seed: int = 28) -> list[dict]:
    rng = random.Random(seed)
    makers = {"code": code, "chat": chat, "summarise": summarise}
    out = [{"prompt": makers[category](rng), "max_tokens": MAX_TOKENS[category], "category": category}
           for _ in range(PER_CATEGORY) for category in makers]
    return out


SYSTEM = "You are a concise assistant. Answer in plain text."


def as_chat(request: dict) -> dict:
    """The same request as chat messages: a system message, then the prompt as the user's message."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": request["prompt"]}]
    return {"messages": messages, "max_tokens": request["max_tokens"], "category": request["category"]}


def main() -> None:
    here = Path(__file__).resolve().parent / "requests"
    prompts = requests()
    for name, rows in (("mixed.jsonl", prompts), ("chat.jsonl", [as_chat(r) for r in prompts])):
        (here / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {here / name} ({len(rows)} requests)")


if __name__ == "__main__":
    main()
