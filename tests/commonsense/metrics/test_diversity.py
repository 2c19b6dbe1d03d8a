"""DIV/Unique/Novel (cached per distinct sentence) equal their definitions."""

import random

import numpy as np

from relations.commonsense.metrics import diversity
from tests.commonsense.metrics import fixtures


def _naive_distinct(sentences, n):
  grams = []
  for s in sentences:
    words = diversity.use_same_id(s).split()
    grams += [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
  return len(set(grams)) / len(grams) if grams else None


def test_div_unique_novel_equal_naive_definitions():
  rng = random.Random(0)
  pool = [fixtures.sentence(rng).lower() for _ in range(300)] + ["", "1 's"]
  groups = [[rng.choice(pool) for _ in range(rng.choice([1, 5]))] for _ in range(400)]
  groups.append([""] * 5)  # No n-grams: left out of the set-level mean.
  pooled = [s for g in groups for s in g]
  got = diversity.div_scores(groups, distinct=True)
  for n in (1, 2):
    per_group = [d for d in (_naive_distinct(g, n) for g in groups) if d is not None]
    assert got[f"DIV{n}_set"] == float(np.mean(per_group))
    assert got[f"DIV{n}_corpus"] == _naive_distinct(pooled, n)
  normed = [diversity.use_same_id(p) for p in pooled]
  assert diversity.unique(pooled) == len(set(normed)) / len(normed)
  train = pool[:100] + ["Walk in."]
  train_set = {diversity.use_same_id(t) for t in train}
  assert diversity.novel(pooled, train) == float(np.mean([p not in train_set for p in normed]))
