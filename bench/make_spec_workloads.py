#!/usr/bin/env python3
"""Writes the two workloads of the speculation benchmark (BENCHMARKS.md §4),
as ChatML prompts, one file per workload, temperature and request count:

  edit  "Copy the following paragraph exactly, correcting only the spelling
        mistake": a paragraph of ~90 words with one letter doubled in one
        word. Output mostly repeats the prompt: prompt lookup's case.
        max_tokens 256, stops at the model's end of turn.
  chat  open-ended requests (stories, explanations, advice): nothing to copy.
        max_tokens 128.

    bench/make_spec_workloads.py --out-dir DIR   ->  DIR/{edit,chat}_t{0.0,0.8}_n{1,4,16,64}.jsonl
"""
import argparse
import json
import random
from pathlib import Path

PARAGRAPHS = [
    "The old lighthouse stood at the edge of the cliff, its white paint peeling after years of salt and wind. "
    "Every evening the keeper climbed the narrow stairs to light the lamp, and every morning he wrote the weather "
    "in a small leather book. Ships passing in the night saw the beam sweep across the water and knew they were "
    "close to home.",
    "Our team met on Tuesday to review the plan for the new library. The architects showed three designs, and "
    "most of us preferred the one with large windows facing the park. The budget is tight, so we agreed to build "
    "the reading rooms first and add the cafe next year if donations allow.",
    "To make the bread, mix the flour, water, salt and yeast in a large bowl until no dry flour remains. Cover "
    "the bowl and let the dough rise for about two hours in a warm place. Then shape it into a round loaf, place "
    "it on a tray and bake it for forty minutes until the crust is deep brown.",
    "The river runs through the middle of the valley, and in spring it often floods the lower fields. Farmers "
    "have learned to plant late, after the water goes down, and the soil left behind is rich and dark. In summer "
    "children swim near the old stone bridge while their parents fish from the bank.",
    "Please remember that the office will be closed on Friday for maintenance work on the heating system. All "
    "staff should take their laptops home on Thursday evening and work remotely the next day. The building will "
    "open again on Monday morning at eight o'clock as usual.",
    "The museum's new exhibition tells the story of early flight, from paper kites to the first engines. "
    "Visitors can sit in a copy of a small wooden plane and watch films of the first pilots. The most popular "
    "room shows letters written by two brothers who spent years testing their ideas on a windy beach.",
    "Regular exercise helps the heart, the lungs and the mind. Walking for thirty minutes a day is enough for "
    "most people to feel a difference within a few weeks. It is best to start slowly, wear comfortable shoes "
    "and choose a route that is safe and pleasant, such as a park or a quiet street.",
    "The village market opens every Saturday in the square in front of the church. Farmers sell fresh "
    "vegetables, cheese, eggs and honey, and a baker brings warm bread from the next town. By noon most of the "
    "stalls are empty, and people sit at the cafe to talk about the week.",
]

CHAT = [
    "Write a short story about a robot learning to paint.",
    "Explain why the sky is blue to a ten-year-old.",
    "Give me three tips for staying focused while studying.",
    "What are the benefits of learning a second language?",
    "Describe a perfect day at the beach.",
    "How do plants make their own food?",
    "Write a poem about the first snow of winter.",
    "What should I pack for a weekend camping trip?",
]


def misspell(rng, text):
    """Doubles one letter of one word of five or more letters."""
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
    i = rng.choice(candidates)
    j = rng.randrange(1, len(words[i]) - 1)
    words[i] = words[i][:j] + words[i][j] + words[i][j:]
    return " ".join(words)


def chatml(user):
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for temp in (0.0, 0.8):
        for n in (1, 4, 16, 64):
            with open(out / f"edit_t{temp}_n{n}.jsonl", "w") as f:
                for i in range(n):
                    text = misspell(rng, PARAGRAPHS[i % len(PARAGRAPHS)])
                    prompt = chatml(f"Copy the following paragraph exactly, correcting only the spelling mistake:\n{text}")
                    f.write(json.dumps({"prompt": prompt, "max_tokens": 256, "temperature": temp, "seed": i}) + "\n")
            with open(out / f"chat_t{temp}_n{n}.jsonl", "w") as f:
                for i in range(n):
                    prompt = chatml(CHAT[i % len(CHAT)])
                    f.write(json.dumps({"prompt": prompt, "max_tokens": 128, "temperature": temp, "seed": i}) + "\n")


if __name__ == "__main__":
    main()
