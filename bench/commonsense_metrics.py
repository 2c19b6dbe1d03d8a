"""Benchmark: our VisualCOMET metrics vs pycocoevalcap 1.2, same 10k hypotheses.

  .venv/bin/python bench/commonsense_metrics.py [--pairs 2000] [--seed 0]

Builds VisualCOMET-style data (2,000 (event, relation) pairs x 5 sampled
generations = 10,000 hypotheses, 2-8 references each, person tags,
punctuation, capitals, ~30% repeated samples), scores it with the official
protocol on pycocoevalcap 1.2 (PTBTokenizer, Bleu, Meteor, Cider; Unique and
Novel as in evaluate_generation.py) and with
relations.commonsense.metrics.protocol.score_generations, checks that every
metric is identical, and prints both wall times, CPU times (this process plus
its Java children) and the ratios.  The one-time indexes of METEOR's
paraphrase table and synonym files (~15 CPU-seconds, cached under
~/.cache/relations) are built before timing and reported separately;
loading them from disk is timed as part of ours.  Ours also computes
Novel_normalised (a third tokenizer run) and DIV, which the reference
does not.
"""

import argparse
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import commonsense_official  # pylint: disable=g-import-not-at-top  (this directory, not tests/)

from relations.commonsense.metrics import paraphrase  # pylint: disable=g-import-not-at-top
from relations.commonsense.metrics import protocol

SUBJ = ["1", "2", "3", "4", "he", "she", "they"]
VERBS = [
  "walk into",
  "ask",
  "greet",
  "hug",
  "leave",
  "order",
  "grab",
  "look at",
  "talk to",
  "sit down at",
  "drive to",
  "run from",
]
OBJS = [
  "the party",
  "2's hand",
  "a drink",
  "the room",
  "her friend",
  "the table",
  "3",
  "the car",
  "his phone",
  "the door",
  "a gun",
  "the crowd",
  "1's jacket",
]
TAILS = [
  "",
  "",
  "",
  ".",
  " quickly",
  " with 2",
  ", then leave",
  " again",
  " before dinner.",
  " because he is late",
]


def _sentence(rng):
  s = f"{rng.choice(VERBS)} {rng.choice(OBJS)}{rng.choice(TAILS)}"
  return s.capitalize() if rng.random() < 0.2 else s


def make_data(num_pairs, seed):
  rng = random.Random(seed)
  num_events = (num_pairs + 2) // 3
  annots = []
  for e in range(num_events):
    annots.append(
      {
        "img_fn": f"movie_{e % 50}/{e}.jpg",
        "event": "1 is talking to 2",
        "place": "at a party",
        **{
          r: [_sentence(rng) for _ in range(rng.randint(2, 8))]
          for r in ("intent", "before", "after")
        },
      }
    )
  gens = []
  for e in range(num_events):
    for r in ("intent", "before", "after"):
      if len(gens) == num_pairs:
        break
      g = [_sentence(rng) for _ in range(5)]
      for k in range(1, 5):
        if rng.random() < 0.3:
          g[k] = g[k - 1]
      g = [x.replace("2's", "<|det2|>'s") for x in g]
      gens.append({"event_idx": e, "inference_relation": r, "generations": g})
  train = [
    {r: [_sentence(rng) for _ in range(3)] for r in ("intent", "before", "after")}
    for _ in range(3000)
  ]
  return annots, gens, train


def _cpu():
  own = resource.getrusage(resource.RUSAGE_SELF)
  kids = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--pairs", type=int, default=2000)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  annots, gens, train = make_data(args.pairs, args.seed)
  n_hyp = sum(len(g["generations"]) for g in gens)
  print(
    f"{n_hyp} hypotheses, {len(gens)} (event, relation) pairs, "
    f"{os.cpu_count()} CPU cores, load {os.getloadavg()[0]:.1f}"
  )

  t0, c0 = time.time(), _cpu()
  paraphrase.load_index()
  paraphrase.load_synonyms()
  print(
    f"one-time paraphrase/synonym index: {time.time() - t0:.1f} s wall, "
    f"{_cpu() - c0:.1f} s CPU (cached on disk afterwards)"
  )
  # Loading the cached index is part of every run: time it with ours.
  paraphrase.clear_loaded()

  t0, c0 = time.time(), _cpu()
  ref = commonsense_official.official_metrics(annots, gens, train)
  t_ref, c_ref = time.time() - t0, _cpu() - c0

  t0, c0 = time.time(), _cpu()
  ours = protocol.score_generations(annots, gens, train)
  t_ours, c_ours = time.time() - t0, _cpu() - c0

  all_equal = True
  print(f"{'metric':<10}{'pycocoevalcap':>22}{'ours':>22}  equal")
  for key in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "Unique", "Novel"):
    equal = float(ref[key]) == float(ours[key])
    all_equal &= equal
    print(f"{key:<10}{float(ref[key]):>22.17g}{float(ours[key]):>22.17g}  {equal}")
  print(f"all equal: {all_equal}")
  print(f"pycocoevalcap: {t_ref:.2f} s wall, {c_ref:.2f} s CPU")
  print(f"ours:          {t_ours:.2f} s wall, {c_ours:.2f} s CPU")
  print(f"speed-up: {t_ref / t_ours:.2f}x wall, {c_ref / c_ours:.2f}x CPU")
  return 0 if all_equal else 1


if __name__ == "__main__":
  sys.exit(main())
