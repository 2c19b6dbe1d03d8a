"""CIDEr-D equal to pycocoevalcap 1.2 ``Cider()`` to the last bit.

Definition (Vedantam et al. with the coco-caption changes): for n = 1..4,
tf-idf vectors with idf = log(N) - log(max(1, df)), where N is the number of
scored items and df the number of items whose reference list contains the
n-gram (so the IDF comes from the evaluated references; a reference list
repeated for 5 hypotheses counts 5 times, exactly as upstream); clipped
cosine similarity to each reference times a Gaussian length penalty
(sigma = 6); mean over n, divided by the number of references, times 10;
the corpus score is the mean over items.

We compute each distinct reference's vector once and each distinct
(hypothesis, reference list) score once, but every floating-point operation
is the one upstream performs, in the same order and with the same numpy /
Python types, so the result is bit-identical.
"""

import collections
from typing import Sequence

import numpy as np

from relations.commonsense.metrics.bleu import ngram_counts


def _to_vec(counts, document_frequency, ref_len, n, log_cache):
  """tf-idf vector (list of dicts per order), norms, 'length'.

  Python floats instead of numpy scalars: IEEE double +, *, / and C pow are
  the same operations either way; np.log is kept (and cached per df value)
  because numpy may use its own SIMD log.
  """
  vec = [dict() for _ in range(n)]
  length = 0
  norm = [0.0 for _ in range(n)]
  for ngram, term_freq in counts.items():
    df_count = max(1.0, document_frequency.get(ngram, 0.0))
    idf = log_cache.get(df_count)
    if idf is None:
      idf = log_cache[df_count] = float(ref_len - np.log(df_count))
    k = len(ngram) - 1
    value = float(term_freq) * idf
    vec[k][ngram] = value
    norm[k] += pow(value, 2)
    if k == 1:  # Upstream counts bigrams here (sic); kept for equality.
      length += term_freq
  norm = [float(np.sqrt(x)) for x in norm]
  return vec, norm, length


def _sim(hyp, ref, n, penalty):
  vec_hyp, norm_hyp, length_hyp = hyp
  vec_ref, norm_ref, length_ref = ref
  pen = penalty(length_hyp - length_ref)
  val = [0.0] * n
  for k in range(n):
    get = vec_ref[k].get
    acc = 0.0
    for ngram, value in vec_hyp[k].items():
      r = get(ngram)
      if r is not None:
        # min(value, r) of two non-negative floats, without the call.
        acc += (value if value <= r else r) * r
      # else: upstream adds min(value, 0.0) * 0.0 == +0.0, a no-op.
    if (norm_hyp[k] != 0) and (norm_ref[k] != 0):
      acc /= norm_hyp[k] * norm_ref[k]
    val[k] = acc * pen
  return val


def corpus_cider(
  hyps: Sequence[str], refs: Sequence[Sequence[str]], n: int = 4, sigma: float = 6.0
):
  """CIDEr-D as pycocoevalcap ``Cider().compute_score`` returns it.

  Args:
    hyps: one tokenised hypothesis per item.
    refs: per item, a non-empty list of tokenised references.
    n: maximum n-gram order.
    sigma: standard deviation of the length penalty.

  Returns:
    (corpus score as np.float64, per-item scores as float64 array [N]).
  """
  if len(hyps) != len(refs):
    raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
  ref_keys = [tuple(r) for r in refs]
  for i, r in enumerate(ref_keys):
    if not r:
      raise ValueError(f"item {i} has no references")
  counts_cache = {}

  def counts_of(sentence):
    c = counts_cache.get(sentence)
    if c is None:
      c = counts_cache[sentence] = ngram_counts(sentence.split(), n)
    return c

  # Document frequency: +1 per item for each n-gram in its reference list.
  multiplicity = collections.Counter(ref_keys)
  document_frequency = collections.defaultdict(float)
  for ref_key, mult in multiplicity.items():
    ngrams = set()
    for ref in ref_key:
      ngrams.update(counts_of(ref))
    for ngram in ngrams:
      document_frequency[ngram] += mult
  if document_frequency and len(hyps) < max(document_frequency.values()):
    raise AssertionError("document frequency exceeds the number of items")
  ref_len = np.log(float(len(ref_keys)))

  vec_cache = {}
  log_cache = {}

  def vec_of(sentence):
    v = vec_cache.get(sentence)
    if v is None:
      v = vec_cache[sentence] = _to_vec(
        counts_of(sentence), document_frequency, ref_len, n, log_cache
      )
    return v

  penalties = {}

  def penalty(diff):
    p = penalties.get(diff)
    if p is None:
      delta = float(diff)
      p = penalties[diff] = np.e ** (-(delta**2) / (2 * sigma**2))
    return p

  # Sums of the per-reference similarities of each distinct pair, then the
  # same numpy mean / divide / multiply upstream applies to each item's
  # [n] vector, done row-wise at once (np.mean over the last axis reduces
  # each row exactly like np.mean of that row alone).
  pair_index = {}
  sums, num_refs, index = [], [], []
  for hyp, ref_key in zip(hyps, ref_keys):
    key = (hyp, ref_key)
    i = pair_index.get(key)
    if i is None:
      i = pair_index[key] = len(sums)
      vec_hyp = vec_of(hyp)
      score = [0.0] * n
      for ref in ref_key:
        val = _sim(vec_hyp, vec_of(ref), n, penalty)
        score = [a + b for a, b in zip(score, val)]
      sums.append(score)
      num_refs.append(len(ref_key))
    index.append(i)
  score_avg = np.mean(np.array(sums, np.float64).reshape(-1, n), axis=1)
  score_avg /= np.array(num_refs)
  score_avg *= 10.0
  scores = score_avg[np.array(index, np.int64)]
  return np.mean(scores), scores
