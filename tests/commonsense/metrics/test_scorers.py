"""BLEU and CIDEr-D equal pycocoevalcap 1.2 bit for bit."""

import random

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider

from relations.commonsense.metrics import bleu
from relations.commonsense.metrics import cider

_WORDS = "a b c d e f g the man woman 1 2 's".split()


def _corpus(seed, n_keys, repeat=5, max_len=10, min_len=0):
  rng = random.Random(seed)
  sent = lambda: " ".join(rng.choice(_WORDS) for _ in range(rng.randint(min_len, max_len)))
  hyps, refs = [], []
  for _ in range(n_keys):
    r = [sent() for _ in range(rng.randint(1, 7))]
    for _ in range(repeat):
      hyps.append(rng.choice([sent(), sent(), r[0], ""]))
      refs.append(r)
  return hyps, refs


CASES = [
  _corpus(0, 400),
  _corpus(1, 1, repeat=1),
  _corpus(2, 3, repeat=1),
  _corpus(3, 50, repeat=2, max_len=2),
  _corpus(4, 200, max_len=25),
  (["a a a a", "a", "", "b c"], [["a"], ["a a a"], ["a"], ["b c", "c b"]]),
  _corpus(5, 30, repeat=5, min_len=1),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_bleu_equal(case):
  hyps, refs = CASES[case]
  gts = {i: list(r) for i, r in enumerate(refs)}
  res = {i: [h] for i, h in enumerate(hyps)}
  expected, _ = Bleu(4).compute_score(gts, res, verbose=0)
  assert bleu.corpus_bleu(hyps, refs) == expected


@pytest.mark.parametrize("case", range(len(CASES)))
def test_cider_equal(case):
  hyps, refs = CASES[case]
  gts = {i: list(r) for i, r in enumerate(refs)}
  res = {i: [h] for i, h in enumerate(hyps)}
  expected, expected_each = Cider().compute_score(gts, res)
  got, got_each = cider.corpus_cider(hyps, refs)
  assert got == expected
  np.testing.assert_array_equal(got_each, expected_each)


def test_known_values():
  # Identical hypothesis and single reference: BLEU = 1 up to the smoothing.
  assert bleu.corpus_bleu(["a b c d"], [["a b c d"]])[3] == pytest.approx(1.0, abs=1e-8)
  # One key: idf = log(1) - log(1) = 0, so CIDEr is 0.
  assert cider.corpus_cider(["a b"], [["a b"]])[0] == 0.0


def test_rejects_empty_references():
  with pytest.raises(ValueError, match="item 1 has no references"):
    bleu.corpus_bleu(["a", "b"], [["a"], []])
