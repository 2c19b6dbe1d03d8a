"""Corpus BLEU-1..4 equal to pycocoevalcap 1.2 ``Bleu(4)`` to the last bit.

pycocoevalcap's scorer (David Chiang's bleu_scorer) sums, over hypotheses,
clipped n-gram matches, n-gram counts, hypothesis lengths and the 'closest'
reference length (ties broken towards the shorter reference), then

  bleu_k = prod_{m<=k} ((correct_m + 1e-15) / (guess_m + 1e-9)) ** (1/k)

times the brevity penalty exp(1 - 1/ratio) when ratio = (testlen + 1e-15) /
(reflen + 1e-9) < 1.  All sums are of integers, so they do not depend on order
and we may score every distinct (hypothesis, reference list) pair once; the
final floating-point expression is evaluated in the same order as upstream.
"""

import collections
import itertools
import math
from typing import Sequence

_TINY = 1e-15
_SMALL = 1e-9


def ngram_counts(words: Sequence[str], n: int = 4) -> collections.Counter:
  """Counts of all 1..n-grams (as tuples) of a token list."""
  # Same keys and first-insertion order (orders 1..n, left to right) as
  # pycocoevalcap's precook; CIDEr's float sums depend on that order.
  return collections.Counter(
    itertools.chain.from_iterable(zip(*[words[j:] for j in range(k)]) for k in range(1, n + 1))
  )


class _Counts(dict):
  """Sentence -> its n-gram counts, computed once per distinct sentence."""

  def __init__(self, n: int):
    super().__init__()
    self.n = n

  def __missing__(self, sentence):
    counts = self[sentence] = ngram_counts(sentence.split(), self.n)
    return counts


class _CookedRefs:
  __slots__ = ("lens", "maxcounts")

  def __init__(self, refs: Sequence[str], n: int, counts: _Counts):
    self.lens = []
    self.maxcounts = {}
    maxcounts = self.maxcounts
    for ref in refs:
      ref_counts = counts[ref]
      # Unigram counts sum to the number of words.
      self.lens.append(sum(c for g, c in ref_counts.items() if len(g) == 1))
      for ngram, count in ref_counts.items():
        if count > maxcounts.get(ngram, 0):
          maxcounts[ngram] = count


def bleu_stats(
  hyp: str, refs: "_CookedRefs", n: int = 4, counts: collections.Counter | None = None
):
  """(testlen, closest reflen, guess[n], correct[n]) of one hypothesis."""
  if counts is None:
    counts = ngram_counts(hyp.split(), n)
  testlen = sum(c for g, c in counts.items() if len(g) == 1)
  reflen = min((abs(l - testlen), l) for l in refs.lens)[1]
  guess = [max(0, testlen - k + 1) for k in range(1, n + 1)]
  correct = [0] * n
  maxcounts = refs.maxcounts
  for ngram, count in counts.items():
    m = maxcounts.get(ngram, 0)
    correct[len(ngram) - 1] += m if m < count else count
  return testlen, reflen, guess, correct


def corpus_bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]], n: int = 4) -> list[float]:
  """Corpus BLEU-1..n as pycocoevalcap ``Bleu(n).compute_score`` returns it.

  Args:
    hyps: one tokenised hypothesis per item (tokens separated by whitespace).
    refs: per item, a non-empty list of tokenised references.
    n: maximum n-gram order.

  Returns:
    [Bleu_1, ..., Bleu_n] as Python floats.
  """
  if len(hyps) != len(refs):
    raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
  cooked = {}
  pair_stats = {}
  counts = _Counts(n)
  testlen_sum = 0
  reflen_sum = 0
  guess_sum = [0] * n
  correct_sum = [0] * n
  for i, (hyp, ref_list) in enumerate(zip(hyps, refs)):
    ref_key = tuple(ref_list)
    if not ref_key:
      raise ValueError(f"item {i} has no references")
    key = (hyp, ref_key)
    stats = pair_stats.get(key)
    if stats is None:
      cooked_refs = cooked.get(ref_key)
      if cooked_refs is None:
        cooked_refs = cooked[ref_key] = _CookedRefs(ref_key, n, counts)
      stats = pair_stats[key] = bleu_stats(hyp, cooked_refs, n, counts[hyp])
    testlen, reflen, guess, correct = stats
    testlen_sum += testlen
    reflen_sum += reflen
    for k in range(n):
      guess_sum[k] += guess[k]
      correct_sum[k] += correct[k]
  # Same expression order as bleu_scorer.BleuScorer.compute_score.
  bleus = []
  bleu = 1.0
  for k in range(n):
    bleu *= float(correct_sum[k] + _TINY) / (guess_sum[k] + _SMALL)
    bleus.append(bleu ** (1.0 / (k + 1)))
  ratio = (testlen_sum + _TINY) / (reflen_sum + _SMALL)
  if ratio < 1:
    for k in range(n):
      bleus[k] *= math.exp(1 - 1 / ratio)
  return bleus
