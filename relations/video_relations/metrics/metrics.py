"""Per-video AP, recall counts and tagging precision, official numerics.

Host numpy on purpose: these are short per-video vectors, and the official
numbers depend on numpy's exact dtypes (float32 cumulative sums, float32
divisions, `np.sum` / `np.mean` pairwise summation over the same arrays), so
the same numpy operations on identical arrays give identical bits.
"""

import numpy as np

_EPS32 = np.finfo(np.float32).eps


def pr_curve(hits: np.ndarray, num_positive: int):
  """Precision / recall after each ranked prediction.

  Args:
    hits: [P] bool, the ranked prediction is a true positive.
    num_positive: number of ground-truth items (denominator of recall).

  Returns:
    (prec [P] float32, rec [P] float32), computed as in the official
    `eval_detection_scores`: float32 cumulative counts, eps-guarded.
  """
  tp = np.asarray(hits, bool)
  fp = ~tp
  cum_tp = np.cumsum(tp).astype(np.float32)
  cum_fp = np.cumsum(fp).astype(np.float32)
  rec = cum_tp / np.maximum(num_positive, _EPS32)
  prec = cum_tp / np.maximum(cum_tp + cum_fp, _EPS32)
  return prec, rec


def voc_ap(rec: np.ndarray, prec: np.ndarray) -> np.float64:
  """VOC2010+ all-points AP (area under the precision envelope).

  Args:
    rec, prec: [P] recall / precision after each ranked prediction.

  Returns:
    np.float64 AP; 0 for empty inputs.
  """
  mrec = np.concatenate(([0.0], rec, [1.0]))
  mpre = np.concatenate(([0.0], prec, [0.0]))
  # Precision envelope: running max from the right (max is exact, so the
  # vectorised form equals a right-to-left loop).
  mpre = np.maximum.accumulate(mpre[::-1])[::-1]
  i = np.where(mrec[1:] != mrec[:-1])[0]
  return np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1])


def tagging_precision(ranked_triplets, ranked_scores, gt_triplets, ks=(1, 5, 10)):
  """Relation tagging precision@k of one video (trajectories ignored).

  The ranked predictions are deduplicated by triplet (first, highest-scored
  occurrence kept); a triplet is a hit when it is a GT triplet and its score
  is finite. P@k is read at position min(k, #unique triplets), so with fewer
  than k triplets it is not divided by k; no predictions give 0.

  Args:
    ranked_triplets: list of tuples in ranked (score-sorted) order.
    ranked_scores: their scores (Python numbers), same order.
    gt_triplets: set of GT triplet tuples.
    ks: the k values.

  Returns:
    {k: np.float32 precision or the Python float 0.}.

  Raises:
    OverflowError: every kept score is a Python int and some triplet misses
      (the official code assigns -inf into an int64 array and fails the same
      way).
  """
  seen = set()
  kept_scores = []
  hit = []
  for t, s in zip(ranked_triplets, ranked_scores):
    if t not in seen:
      seen.add(t)
      kept_scores.append(s)
      hit.append(t in gt_triplets)
  scores = np.asarray(kept_scores)
  if scores.dtype.kind in "iu" and not all(hit):
    raise OverflowError("cannot convert float infinity to integer")
  tp = np.asarray(hit, bool) & np.isfinite(scores.astype(np.float64))
  prec, _ = pr_curve(tp, len(gt_triplets))
  out = {}
  for k in ks:
    cut = min(k, prec.size)
    out[k] = prec[cut - 1] if cut > 0 else 0.0
  return out


def recall_at(tp_count: int, num_gt: int) -> np.float32:
  """Micro-averaged recall: float32(tp_count) / float32(num_gt)."""
  cum = np.asarray([tp_count], np.int64).astype(np.float32)
  return (cum / np.maximum(num_gt, _EPS32))[-1]
