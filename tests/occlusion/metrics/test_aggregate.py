"""ODS / OIS / AP on hand-computed cases."""

import numpy as np

from relations.occlusion.metrics import aggregate
from relations.occlusion.metrics import api


def test_single_threshold_and_rpf():
  r, p, f = aggregate.rpf(3, 4, 3, 6)
  assert (r, p) == (0.75, 0.5)
  assert abs(f - 0.6) < 1e-15
  assert aggregate.best_rpf([0.5], [0.75], [0.5]) == (0.75, 0.5, f, 0.5)


def test_ods_interpolates_r_and_p_not_f():
  t = np.array([0.25, 0.75])
  r = np.array([1.0, 0.0])
  p = np.array([0.2, 1.0])
  br, bp, bf, bt = aggregate.best_rpf(t, r, p)
  # Plain-loop restatement of edgesEvalDir's aggregation on this two-threshold curve.
  best = (-1, None)
  for i in range(100):
    a = i / 99
    ri, pi = a * 0.0 + (1 - a) * 1.0, a * 1.0 + (1 - a) * 0.2
    f = 2 * pi * ri / (pi + ri)
    if f > best[0]:
      best = (f, (ri, pi, 0.75 * a + 0.25 * (1 - a)))
  assert abs(bf - best[0]) < 1e-12
  np.testing.assert_allclose((br, bp, bt), best[1], atol=1e-12)
  # Interpolating F instead would give at most max(F(k)) = 0 here.
  assert bf > 0.5


def test_ap_first_occurrence_and_nan_outside_range():
  # Recalls 0.5 (twice) and 1.0: unique keeps the first 0.5 (P = 0.6).
  r = np.array([1.0, 0.5, 0.5])
  p = np.array([0.2, 0.6, 1.0])
  ap = aggregate.average_precision(r, p)
  q = np.arange(50, 101) / 100
  want = np.interp(q, [0.5, 1.0], [0.6, 0.2]).sum() / 100
  assert abs(ap - want) < 1e-12
  assert aggregate.average_precision([0.3, 0.3], [0.1, 0.9]) == 0.0


def test_ois_first_argmax_and_all_zero_image():
  thr = np.array([0.2, 0.5])
  # Image A: F is 0 at every threshold -> first threshold is selected and all
  # its predictions enter the OIS precision denominator.
  # Image B: best at threshold 2.
  cnt_r = np.array([[0, 0], [5, 8]])
  sum_r = np.array([[10, 10], [10, 10]])
  cnt_p = np.array([[0, 0], [5, 8]])
  sum_p = np.array([[40, 4], [20, 10]])
  s = aggregate.summarize(thr, cnt_r, sum_r, cnt_p, sum_p)
  r, p = 8 / 20, 8 / 50
  assert abs(s["OIS_R"] - r) < 1e-15 and abs(s["OIS_P"] - p) < 1e-15
  assert abs(s["OIS"] - 2 * p * r / (p + r)) < 1e-15
  assert s["OIS"] < s["ODS"]  # the paper's "OIS below ODS" effect


def test_image_without_predictions_and_without_gt():
  thr = np.linspace(0.01, 0.99, 99)
  empty = dict(thresholds=thr)
  for k in (
    "cnt_r",
    "sum_r",
    "cnt_p",
    "sum_p",
    "cnt_r_occ",
    "cnt_p_occ",
    "cnt_r_valid",
    "sum_r_valid",
    "cnt_r_occ_valid",
    "cnt_p_occ_valid",
    "sum_p_valid",
  ):
    empty[k] = np.zeros(99, np.int64)
  empty["sum_r"][:] = 7
  s = api.summarize_counts([empty])
  assert s["B-ODS"] == 0 and s["B-OIS"] == 0 and s["B-AP"] == 0
