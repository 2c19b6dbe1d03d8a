"""ROUGE-L equals pycocoevalcap 1.2 ``Rouge`` bit for bit; Vocab / Sent_Len known values."""

import random

import numpy as np
import pytest
from pycocoevalcap.rouge.rouge import Rouge

from relations.commonsense.metrics import protocol, rouge
from tests.commonsense.metrics import fixtures, oracle

_WORDS = ["a", "b", "c", "d", "e", "the", "man", "woman", "1", "2", "'s", "walk", "in"]


def _sentence(rng):
  # Mostly single-spaced PTB-like text, sometimes empty or with the double / edge spaces that
  # upstream's split(" ") turns into empty tokens.
  words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 12))]
  sep = rng.choice([" "] * 8 + ["  "])
  s = sep.join(words)
  if rng.random() < 0.05:
    s = " " + s
  if rng.random() < 0.05:
    s += " "
  return s


def _fuzzed_cases(n, seed=0):
  rng = random.Random(seed)
  cases = []
  for _ in range(n):
    refs = [_sentence(rng) for _ in range(rng.randint(1, 6))]
    hyp = rng.choice([_sentence(rng), refs[0], refs[-1] + " x", ""])
    cases.append((hyp, refs))
  return cases


CASES = _fuzzed_cases(300)


def test_sentence_scores_equal_pycocoevalcap_on_300_fuzzed_cases():
  scorer = Rouge()
  nonzero = 0
  for i, (hyp, refs) in enumerate(CASES):
    want = scorer.calc_score([hyp], refs)
    got = rouge.sentence_rouge_l(hyp, refs)
    assert got == want, (i, hyp, refs)
    nonzero += want > 0
  # The fuzzing reaches both branches (zero and non-zero F) and perfect matches.
  assert 50 < nonzero < len(CASES)
  assert any(rouge.sentence_rouge_l(h, r) == pytest.approx(1.0) for h, r in CASES)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_corpus_score_equals_pycocoevalcap(seed):
  cases = _fuzzed_cases(250, seed)
  # Repeat some items (5 samples share a reference list), as in the protocol.
  cases += cases[:40]
  gts = {i: list(r) for i, (_, r) in enumerate(cases)}
  res = {i: [h] for i, (h, _) in enumerate(cases)}
  want, want_each = Rouge().compute_score(gts, res)
  got, got_each = rouge.corpus_rouge_l([h for h, _ in cases], [r for _, r in cases])
  assert got == want
  np.testing.assert_array_equal(got_each, want_each)


def test_known_values():
  # LCS("a b c d", "a c d e") = 3: P = R = 3/4, F = 3/4 for any beta.
  assert rouge.sentence_rouge_l("a b c d", ["a c d e"]) == pytest.approx(0.75)
  # P and R are maximised over references separately: P = 1 (ref "a b c"), R = 1 (ref "a").
  assert rouge.sentence_rouge_l("a", ["a b c", "a"]) == pytest.approx(1.0)
  # P = 1/1, R = 1/3: F = 2.44 * (1/3) / (1/3 + 1.44) = 0.4586...
  assert rouge.sentence_rouge_l("a", ["a b c"]) == pytest.approx(2.44 / 3 / (1 / 3 + 1.44))
  assert rouge.sentence_rouge_l("x", ["a b"]) == 0.0
  assert rouge.lcs_length(["a", "b", "c", "b", "d", "a", "b"], ["b", "d", "c", "a", "b", "a"]) == 4


def test_errors_name_the_item():
  with pytest.raises(ValueError, match="item 1 has no references"):
    rouge.corpus_rouge_l(["a", "b"], [["a"], []])
  with pytest.raises(ValueError, match="2 hypotheses but 1 reference lists"):
    rouge.corpus_rouge_l(["a", "b"], [["a"]])


def test_vocab_and_sentence_length():
  got = rouge.vocab_stats(["walk in", "walk out now", ""])
  assert got == {"Vocab": 4, "Sent_Len": 5 / 3}
  with pytest.raises(ValueError, match="at least one sentence"):
    rouge.vocab_stats([])


def test_protocol_reports_rouge_equal_to_official_and_vocab():
  annots, gens, train = fixtures.dataset(seed=4, num_events=30)
  _, tok_refs, tok_preds = oracle.official_metrics(annots, gens, train, meteor=False)
  want, _ = Rouge().compute_score(tok_refs, tok_preds)
  got = protocol.score_generations(annots, gens, train, meteor=False)
  assert got["ROUGE_L"] == want
  hyps = [p[0] for p in tok_preds.values()]
  assert got["Vocab"] == len({w for h in hyps for w in h.split()})
  assert got["Sent_Len"] == sum(len(h.split()) for h in hyps) / len(hyps)
  refs = sorted({r for rs in tok_refs.values() for r in rs})
  assert got["GT_Vocab"] == len({w for r in refs for w in r.split()})


def test_sparse_overlap_cases_equal_pycocoevalcap():
  # A larger vocabulary: many pairs share no or few words (the shortcut's paths).
  rng = random.Random(7)
  words = [f"w{i}" for i in range(40)]
  scorer = Rouge()
  for _ in range(300):
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(3)]
    hyp = " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
    assert rouge.sentence_rouge_l(hyp, refs) == scorer.calc_score([hyp], refs), (hyp, refs)
