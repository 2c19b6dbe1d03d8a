"""Varied VisualCOMET-format inputs for the metric equality tests."""

import random

WORDS = (
  "the a man woman 1 2 3 12 walk into room party ask to dance drink "
  "order greet her his hand kiss talk go home sit down chair table "
  "look at phone cannot gonna colour"
).split()
ODD = [
  "Arrive at the party.",
  "1's hand",
  "He said \"hi\" to 2",
  "etc.",
  "U.S.",
  "Mr. Smith",
  "",
  "  ",
  "don't go",
  "cannot GO",
  "12 345 6789",
  "café naïve",
  "a/b 3*4",
  "(paren) [x] {y}",
  "well... ok!",
  "co-op -- x",
  "Ω 漢字 🙂",
  "wait;  what:",
  "it's 2's",
  "'tis",
  "rock'n'roll",
  "1 2",
  "I  am   here ",
  "e.g. this",
  "&amp; & x",
  "\t tab",
  "a\u00a0b",
  "end.",
  "ask 3 ||| to",
  "Gonna be  ok?",
  "the end\n of line",
  "U.S.-based firm",
  "a.m. to p.m.",
  "1,000 people",
  "rock-n-roll",
  "e-mail 2",
  "Ph.D. student",
  "well...done",
  "\u2018quoted\u2019 \u201cdouble\u201d",
  "mother-in-law's car",
  "x.y.z corp",
  "N.Y.C. cab",
]


def sentence(rng: random.Random) -> str:
  r = rng.random()
  if r < 0.25:
    return rng.choice(ODD) + rng.choice(["", " ", ".", " The", " the"])
  s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
  if r < 0.45:
    s = s.capitalize() + "."
  elif r < 0.55:
    s = s.replace(" 1", " 1's")
  return s


def dataset(seed: int, num_events: int = 60):
  """(annotations, generations, train) with empty lists, repeats, tags."""
  rng = random.Random(seed)
  annots = []
  for e in range(num_events):
    rec = {
      "img_fn": f"movie_{e % 7}/img{e}.jpg",
      "movie": f"movie_{e % 7}",
      "metadata_fn": f"movie_{e % 7}/img{e}.json",
      "split": "val",
      "place": "at a party",
      "event": "1 is talking to 2",
    }
    for rel in ("intent", "before", "after"):
      rec[rel] = [sentence(rng) for _ in range(rng.choice([0, 1, 2, 4, 6]))]
    annots.append(rec)
  gens = []
  for e in range(num_events):
    for rel in ("intent", "before", "after"):
      g = [sentence(rng) for _ in range(5)]
      if rng.random() < 0.3:  # Repeated hypotheses.
        g = [g[0]] * 5
      if rng.random() < 0.3:  # Copies of a reference.
        refs = annots[e][rel]
        if refs:
          g[1] = refs[0]
      g = [x.replace(" 2", " <|det2|>") for x in g]
      gens.append({"event_idx": e, "inference_relation": rel, "generations": g})
  train = [
    {"intent": [sentence(rng) for _ in range(3)], "before": [sentence(rng)], "after": []}
    for _ in range(200)
  ]
  train.append({"intent": [g for rec in gens[:20] for g in rec["generations"]]})
  return annots, gens, train
