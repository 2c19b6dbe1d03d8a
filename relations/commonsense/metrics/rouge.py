"""ROUGE-L equal to pycocoevalcap 1.2 ``Rouge()``, plus vocabulary size and sentence length.

pycocoevalcap's ROUGE-L (used by the paper's Table 6, column R):

* tokens are ``sentence.split(" ")`` (a single space, so "" is one empty
  token and a double space makes an empty token; PTB-tokenised text has
  neither except for the empty caption);
* per reference, LCS length l of hypothesis and reference, precision
  l / |hyp| and recall l / |ref|;
* precision and recall are maximised over the references **independently**
  (not the F of the best reference);
* F = (1 + beta^2) P R / (R + beta^2 P) with beta = 1.2, or 0 when P or R
  is 0; the corpus score is the numpy mean over items.

Each distinct (hypothesis, reference list) pair is scored once; the
floating-point expressions are upstream's, in the same order, so the values
are bit-identical.

Table 6 also reports "Vocab" (distinct words over all generated sentences)
and "Sent Len" (mean words per sentence); `vocab_stats` computes both on
PTB-tokenised text.
"""

from collections.abc import Sequence

import numpy as np

BETA = 1.2


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
  """Length of the longest common subsequence of two token lists (O(|a| |b|) time, O(|b|) memory)."""
  if len(a) < len(b):
    a, b = b, a
  # prev[j] = LCS of a[:i-1] and b[:j]; one row at a time.
  prev = [0] * (len(b) + 1)
  for x in a:
    cur = [0] * (len(b) + 1)
    for j, y in enumerate(b, start=1):
      if x == y:
        cur[j] = prev[j - 1] + 1
      else:
        cur[j] = max(prev[j], cur[j - 1])
    prev = cur
  return prev[-1]


def sentence_rouge_l(hyp: str, refs: Sequence[str], beta: float = BETA) -> float:
  """ROUGE-L F of one hypothesis against its references (pycocoevalcap ``calc_score``).

  Raises:
    ValueError: `refs` is empty.
  """
  if not refs:
    raise ValueError("ROUGE-L needs at least one reference")
  hyp_tokens = hyp.split(" ")
  hyp_set = set(hyp_tokens)
  best_p = best_r = 0.0
  for ref in refs:
    ref_tokens = ref.split(" ")
    # Tokens absent from the other sentence are never part of a common subsequence: dropping
    # them leaves the LCS length unchanged and shrinks the table (often to nothing).
    common = hyp_set.intersection(ref_tokens)
    if common:
      lcs = lcs_length(
        [t for t in ref_tokens if t in common], [t for t in hyp_tokens if t in common]
      )
    else:
      lcs = 0
    best_p = max(best_p, lcs / float(len(hyp_tokens)))
    best_r = max(best_r, lcs / float(len(ref_tokens)))
  if best_p == 0 or best_r == 0:
    return 0.0
  return ((1 + beta**2) * best_p * best_r) / float(best_r + beta**2 * best_p)


def corpus_rouge_l(hyps: Sequence[str], refs: Sequence[Sequence[str]], beta: float = BETA):
  """Corpus ROUGE-L as pycocoevalcap ``Rouge().compute_score`` returns it.

  Args:
    hyps: one tokenised hypothesis per item.
    refs: per item, a non-empty list of tokenised references.
    beta: recall weight (1.2 upstream).

  Returns:
    (mean as np.float64, per-item scores as float64 array [N]).

  Raises:
    ValueError: length mismatch or an item without references (named by index).
  """
  if len(hyps) != len(refs):
    raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
  cache = {}
  scores = []
  for i, (hyp, ref_list) in enumerate(zip(hyps, refs)):
    key = (hyp, tuple(ref_list))
    if not key[1]:
      raise ValueError(f"item {i} has no references")
    s = cache.get(key)
    if s is None:
      s = cache[key] = sentence_rouge_l(hyp, key[1], beta)
    scores.append(s)
  scores = np.array(scores)
  return np.mean(scores), scores


def vocab_stats(sentences: Sequence[str]) -> dict[str, float]:
  """{"Vocab": distinct words, "Sent_Len": mean words per sentence} of tokenised sentences.

  Words are whitespace-separated tokens; an empty sentence has length 0.

  Raises:
    ValueError: no sentences.
  """
  if not sentences:
    raise ValueError("Vocab/Sent_Len need at least one sentence")
  vocab = set()
  total = 0
  for s in sentences:
    words = s.split()
    vocab.update(words)
    total += len(words)
  return {"Vocab": len(vocab), "Sent_Len": total / len(sentences)}
