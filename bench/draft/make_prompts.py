#!/usr/bin/env python3
"""Chat prompts for distilling a draft model, none of them a benchmark prompt.

    bench/draft/make_prompts.py --out DIR [--train 5000] [--heldout 256] [--seed 5]
      -> DIR/train.jsonl, DIR/heldout.jsonl (one ChatML prompt string per line)

Requests are drawn from request shapes crossed with topics, the kind of
open-ended requests the chat workload makes (bench/make_spec_workloads.py).
The benchmark's own requests and their topics are excluded, so that the
draft's acceptance on the workload is measured on requests it never saw; the
held-out file is a second such check on requests drawn from the same shapes.
"""
import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from make_spec_workloads import CHAT, chatml  # noqa: E402

SHAPES = [
    "Write a short story about {t}.",
    "Write a story for children about {t}.",
    "What are the benefits of {t}?",
    "How does {t} work?",
    "Describe a perfect afternoon with {t}.",
    "What should I know before trying {t}?",
    "Give me three reasons to learn about {t}.",
    "Why is {t} important?",
    "Tell me something surprising about {t}.",
    "Write a very short story in which {t} plays a part.",
    "Explain {t} in simple words.",
    "Explain {t} to a ten-year-old.",
    "Give me three facts about {t}.",
    "Give me five tips related to {t}.",
    "What are the advantages and disadvantages of {t}?",
    "What is the history of {t}?",
    "Describe {t} in a few sentences.",
    "Write a poem about {t}.",
    "Write a haiku about {t}.",
    "How would you teach someone about {t}?",
    "Why do people care about {t}?",
    "Write a friendly email to a colleague about {t}.",
    "Summarize what you know about {t}.",
    "What are common misconceptions about {t}?",
    "Write a product description inspired by {t}.",
    "Tell me a fun fact about {t}.",
    "Write a dialogue between two friends discussing {t}.",
    "What questions should I ask an expert on {t}?",
    "Write a short speech about {t}.",
    "Compare {t} with something similar and explain the differences.",
    "Write a diary entry about a day spent with {t}.",
    "List some words that come to mind when thinking about {t}.",
    "Create a short quiz with answers about {t}.",
    "Write a motivational message that mentions {t}.",
    "What would the world be like without {t}?",
    "Write a limerick about {t}.",
    "Give a step-by-step introduction to {t}.",
    "Write a news headline and a short article about {t}.",
    "How can a beginner get started with {t}?",
    "What are the most important things to know about {t}?",
]

TOPICS = [
    "volcanoes", "honey bees", "the moon landing", "rainforests", "electric cars", "chess", "the water cycle",
    "ancient Egypt", "origami", "black holes", "composting", "jazz music", "the human heart", "coral reefs",
    "bicycles", "the printing press", "penguins", "solar panels", "baking bread", "the Roman Empire",
    "photosynthesis in algae", "earthquakes", "coffee", "the internet", "dinosaurs", "recycling", "lighthouses",
    "the Olympic Games", "submarines", "gardening in small spaces", "time zones", "the solar system", "wolves",
    "public libraries", "hot air balloons", "vaccines", "the stock market", "knitting", "rain", "deserts",
    "friendship", "a lost umbrella", "a talking cat", "a dragon who is afraid of fire", "a lighthouse keeper",
    "a time traveler", "a small bakery", "a mountain village", "an old map", "a city at night", "autumn leaves",
    "a rainy afternoon", "a broken clock", "the first day at a new school", "a musician on the street",
    "a pirate ship", "a secret garden", "a lonely astronaut", "a birthday party", "a train journey",
    "a family picnic", "a mysterious letter", "a brave mouse", "the ocean at dawn", "a kind stranger",
    "sleep", "healthy breakfast ideas", "saving money", "learning to cook", "public speaking", "meditation",
    "time management", "keeping a journal", "running a marathon", "writing a resume", "moving to a new city",
    "learning to swim", "taking care of a puppy", "growing tomatoes", "starting a podcast", "drinking enough water",
    "reading more books", "planning a road trip", "working from home", "making new friends", "the metric system",
    "magnets", "rainbows", "tides", "gravity", "the periodic table", "DNA", "the immune system", "clouds",
    "sound waves", "ice ages", "the speed of light", "bridges", "airplanes",
    "artificial intelligence", "smartphones", "video games", "the history of money", "windmills", "maps",
    "the Great Wall of China", "the pyramids of Giza", "the Amazon river", "Mount Everest", "the Sahara",
    "Antarctica", "the Pacific Ocean", "Venice", "Tokyo", "the Alps", "Iceland", "the Nile", "Paris in spring",
    "elephants", "octopuses", "owls", "butterflies", "sharks", "dolphins", "ants", "horses", "tigers", "frogs",
    "teamwork", "kindness", "courage", "patience", "curiosity", "honesty", "creativity", "gratitude",
    "football", "basketball", "tennis", "yoga", "hiking", "skiing", "surfing", "rock climbing",
    "pizza", "chocolate", "tea", "spices", "cheese making", "sushi", "soup", "fresh fruit",
    "photography", "playing the guitar", "learning the piano", "dancing",
    "pottery", "poetry", "theater", "film making", "street art", "museums", "architecture",
    "the weather", "climate change", "forests", "rivers", "oceans", "islands", "caves", "glaciers",
    "fireworks", "festivals", "holidays", "birthdays", "weddings", "markets", "trains", "ships",
    "electricity", "batteries", "computers", "printers", "telescopes", "microscopes", "calculators",
    "a lost puppy", "a magic key", "a lonely whale", "a forgotten toy", "a clever fox", "a shy giant",
    "an old bookshop", "a windy day", "a treehouse", "a night train", "a young inventor", "a flying carpet",
    "the northern lights", "thunderstorms", "fog", "the seasons", "sunsets", "the desert at night",
    "saving energy at home", "eating more vegetables", "getting up early", "learning to code", "writing poetry",
    "playing chess well", "taking good photos", "keeping plants alive", "traveling on a budget", "bird watching",
    "the human brain", "bones", "muscles", "teeth", "eyes", "the sense of smell", "sleep cycles", "hiccups",
    "volunteering", "recycling plastic", "clean water", "public transport", "city parks", "farming", "fishing",
    "bread", "rice", "apples", "bananas", "ice cream", "pancakes", "salads", "herbal tea",
    "the alphabet", "numbers", "fractions", "geometry", "statistics", "programming", "databases",
]

BENCHMARK_TOPICS = ["robot", "paint", "sky", "blue", "focused", "studying", "second language", "beach",
                    "plants make", "snow", "camping"]


def requests(rng, n, exclude):
    out, seen = [], set(exclude)
    while len(out) < n:
        text = rng.choice(SHAPES).format(t=rng.choice(TOPICS))
        text = text[0].upper() + text[1:]
        if text in seen:
            continue
        seen.add(text)
        out.append(text)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=5000)
    ap.add_argument("--heldout", type=int, default=256)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    for topic in TOPICS:
        for word in BENCHMARK_TOPICS:
            assert word not in topic.lower(), f"topic '{topic}' is close to a benchmark request ('{word}')"
    available = len(SHAPES) * len(TOPICS)
    if args.train + args.heldout > available * 0.9:
        sys.exit(f"asked for {args.train + args.heldout} requests of {available} possible; ask for fewer")
    rng = random.Random(args.seed)
    heldout = requests(rng, args.heldout, CHAT)
    train = requests(rng, args.train, CHAT + heldout)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("heldout", heldout)):
        with open(out / f"{name}.jsonl", "w") as f:
            for text in rows:
                f.write(json.dumps(chatml(text)) + "\n")
    print(f"{len(train)} training and {len(heldout)} held-out requests in {out}")


if __name__ == "__main__":
    main()
