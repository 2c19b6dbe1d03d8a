"""Unique, Novel (official and normalised) and DIV-1/2 for VisualCOMET.

Official definitions (jamespark3922/visual-comet scripts/evaluate_generation.py
with --diversity):

* ``use_same_id(s)``: s.replace("'", " '"), every whitespace token with
  str.isdigit() becomes "1", join with spaces, strip, then " '" -> "'".
  Person tags ("2's" -> "1's") therefore do not count as differences.
* Unique = |set(use_same_id(p))| / |P| over the PTB-tokenised predictions P
  that were scored (all events and relations pooled; (event, relation) pairs
  with an empty reference list are excluded).
* Novel (official) = mean over P of [use_same_id(p) not in T] where T is
  {use_same_id(s)} over the RAW intent/before/after sentences of the training
  annotations.  Predictions are PTB-tokenised (lower-case, punctuation
  dropped) but training sentences are not, so e.g. "Arrive at the party." can
  never match and the official Novel is inflated.
* Novel_normalised (ours, NOT official): the same, but training sentences are
  PTB-tokenised like the predictions first.

DIV, on PTB-tokenised, use_same_id-normalised generations (the paper replaces
person tags by one tag for every diversity score):
* ``DIV1_S`` / ``DIV2_S`` (default; the seed's definition, paper Table 5: "ratio of unique
  unigrams/bigrams to number of words within the set of 5 sentences"): per scored
  (event, relation) pair, distinct n-grams of its generations / their number of words; mean
  over pairs with at least one word.  For n = 1 this equals distinct-1; for n = 2 it is
  smaller (a set of 5 sentences has 5 fewer bigrams than words).
* distinct-n, the earlier variant, only with ``distinct_n=True``: distinct n-grams / total
  n-grams, ``DIV1_set`` / ``DIV2_set`` averaged over pairs that have at least one n-gram,
  ``DIV1_corpus`` / ``DIV2_corpus`` over all generations pooled.
"""

from collections.abc import Iterable, Sequence

import numpy as np


def use_same_id(sent: str) -> str:
  """Official person-tag normalisation (every digit token becomes "1")."""
  r_sent = sent.replace("'", " '")
  r_sent = " ".join(g if not g.isdigit() else "1" for g in r_sent.split()).strip()
  return r_sent.replace(" '", "'")


def unique(predictions: Sequence[str]) -> float:
  """Official Unique over tokenised predictions (pooled)."""
  if not predictions:
    raise ValueError("Unique needs at least one prediction")
  return len({use_same_id(p) for p in set(predictions)}) / len(predictions)


def novel(predictions: Sequence[str], train_sentences: Iterable[str]) -> float:
  """Fraction of predictions whose normalised form is not a training one.

  With raw training sentences this is the official Novel; pass PTB-tokenised
  training sentences for the normalised (non-official) variant.
  """
  if not predictions:
    raise ValueError("Novel needs at least one prediction")
  train = {use_same_id(s) for s in set(train_sentences)}
  is_novel = {p: use_same_id(p) not in train for p in set(predictions)}
  # np.mean of a bool list, exactly as upstream (returns np.float64).
  return float(np.mean([is_novel[p] for p in predictions]))


def train_sentences(train_annotations: Sequence[dict]) -> list[str]:
  """All intent/before/after sentences of training records, in file order."""
  out = []
  for i, record in enumerate(train_annotations):
    for rel in ("intent", "before", "after"):
      if rel in record:
        sents = record[rel]
        if not isinstance(sents, list):
          raise ValueError(
            f"training record {i}: field {rel!r} must be a "
            f"list of strings, got {type(sents).__name__}"
          )
        out.extend(sents)
  return out


def _ngrams(words, n):
  return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def distinct_n(sentences: Sequence[str], n: int, _grams: dict | None = None) -> float | None:
  """Distinct n-grams / total n-grams over `sentences`; None if no n-grams."""
  if _grams is None:
    _grams = {}
  distinct, total = set(), 0
  for s in sentences:
    grams = _grams.get(s)
    if grams is None:
      grams = _grams[s] = _ngrams(use_same_id(s).split(), n)
    distinct.update(grams)
    total += len(grams)
  if not total:
    return None
  return len(distinct) / total


def div_s(sentences: Sequence[str], n: int, _cache: dict | None = None) -> float | None:
  """The seed's DIVn-S of one set: distinct n-grams / number of words; None if no words.

  `_cache`: sentence -> (its n-grams, its word count), shared across calls with the same n.
  """
  if _cache is None:
    _cache = {}
  distinct, words = set(), 0
  for s in sentences:
    entry = _cache.get(s)
    if entry is None:
      tokens = use_same_id(s).split()
      entry = _cache[s] = (_ngrams(tokens, n), len(tokens))
    distinct.update(entry[0])
    words += entry[1]
  if not words:
    return None
  return len(distinct) / words


def div_scores(groups: Sequence[Sequence[str]], distinct: bool = False) -> dict[str, float]:
  """DIV1_S / DIV2_S (the seed's, mean over groups), plus distinct-n if `distinct`.

  Args:
    groups: per scored (event, relation) pair, its tokenised generations.
    distinct: also the distinct-n variant (DIV{n}_set mean over groups, DIV{n}_corpus pooled).

  Returns:
    {"DIV1_S", "DIV2_S"} (+ {"DIV1_set", "DIV2_set", "DIV1_corpus", "DIV2_corpus"}); 0.0 when
    no group has a word (n-gram).
  """
  out = {}
  for n in (1, 2):
    grams = {}
    per_group = [d for d in (div_s(g, n, grams) for g in groups) if d is not None]
    out[f"DIV{n}_S"] = float(np.mean(per_group)) if per_group else 0.0
  if not distinct:
    return out
  pooled = [s for g in groups for s in g]
  for n in (1, 2):
    grams = {}  # Sentence -> its n-grams, computed once per distinct one.
    per_group = [d for d in (distinct_n(g, n, grams) for g in groups) if d is not None]
    out[f"DIV{n}_set"] = float(np.mean(per_group)) if per_group else 0.0
    corpus = distinct_n(pooled, n, grams)
    out[f"DIV{n}_corpus"] = corpus if corpus is not None else 0.0
  return out
