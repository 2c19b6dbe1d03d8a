"""The matcher equals exact maximum matchings (scipy) on every threshold."""

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from scipy.sparse import csgraph

from relations.occlusion.metrics import image_eval
from relations.occlusion.metrics import matching
from relations.occlusion.metrics import nms
from tests.occlusion.metrics import fixtures


def _scipy_cardinality(pred_yx, gt_yx, r):
  if len(pred_yx) == 0 or len(gt_yx) == 0:
    return 0
  d2 = ((pred_yx[:, None, :] - gt_yx[None, :, :]) ** 2).sum(-1)
  adj = scipy.sparse.csr_matrix(d2 <= r * r)
  m = csgraph.maximum_bipartite_matching(adj, perm_type="column")
  return int((m >= 0).sum())


def _exact_cost(pred_yx, gt_yx, r):
  """Lexicographic optimum by a dense assignment with a large pair bonus."""
  d2 = ((pred_yx[:, None, :] - gt_yx[None, :, :]) ** 2).sum(-1).astype(float)
  ok = d2 <= r * r
  w = np.rint(np.sqrt(d2) * 100)
  c = np.where(ok, w - 1e7, 0.0)
  ri, ci = scipy.optimize.linear_sum_assignment(c)
  sel = ok[ri, ci]
  return int(sel.sum()), int(w[ri, ci][sel].sum())


def test_sweep_counts_equal_maximum_matching_on_every_threshold():
  pairs = fixtures.pairs()
  assert len(pairs) >= 30
  thr32 = image_eval.thresholds(99).astype(np.float32)
  checked = 0
  for s in pairs:
    prob, gt = s["prob"], s["gts"][0]
    h, w = prob.shape
    md = matching.max_dist_pixels(h, w, 0.0075)
    counts = image_eval.evaluate_image(prob, [gt], nthresh=99)
    e = nms.edge_nms(prob)
    gt_yx = np.argwhere(gt)
    for k in range(99):
      pred_yx = np.argwhere(e >= thr32[k])
      want = _scipy_cardinality(pred_yx, gt_yx, md)
      assert counts["cnt_r"][k] == want, (h, w, k)
      assert counts["cnt_p"][k] == want
      assert counts["sum_p"][k] == len(pred_yx)
      checked += 1
  assert checked == 99 * len(pairs)


@pytest.mark.parametrize("seed", range(12))
def test_match_pixels_is_minimum_cost_maximum_matching(seed):
  rng = np.random.default_rng(seed)
  h, w = rng.integers(8, 40, 2)
  pred = rng.random((h, w)) < rng.uniform(0.02, 0.4)
  gt = rng.random((h, w)) < rng.uniform(0.02, 0.4)
  max_dist = float(rng.choice([0.0075, 0.03, 0.08]))
  m1, m2, cost = matching.match_pixels(pred, gt, max_dist)
  r = matching.max_dist_pixels(h, w, max_dist)
  card, best = _exact_cost(np.argwhere(pred), np.argwhere(gt), r)
  assert (m1 > 0).sum() == card == (m2 > 0).sum()
  assert cost == best
  # Every pair is within the tolerance and the two maps agree.
  p = np.argwhere(m1 > 0)
  q = m1[m1 > 0] - 1
  qy, qx = q // w, q % w
  assert np.all((p[:, 0] - qy) ** 2 + (p[:, 1] - qx) ** 2 <= r * r)
  np.testing.assert_array_equal(m2[qy, qx] - 1, p[:, 0] * w + p[:, 1])


def test_sweep_pairs_equal_fresh_min_cost_matching_per_threshold():
  # The incremental sweep must reach the same optimum (cardinality and
  # total cost) as solving each threshold's set from scratch.
  rng = np.random.default_rng(7)
  h, w = 40, 50
  vals = rng.random((h, w)).astype(np.float32) ** 3
  gt = rng.random((h, w)) < 0.08
  md = matching.max_dist_pixels(h, w, 0.05)
  thr32 = image_eval.thresholds(9).astype(np.float32)
  yx = np.argwhere(vals >= thr32[0])
  bucket = np.searchsorted(thr32, vals[yx[:, 0], yx[:, 1]], side="right") - 1
  order = np.argsort(-bucket, kind="stable")
  res = matching.sweep_counts(yx[order], bucket[order], gt, md, 9)
  for k in range(9):
    card, _ = _exact_cost(np.argwhere(vals >= thr32[k]), np.argwhere(gt), md)
    assert res["cnt_r"][k] == card


def test_window_offsets_use_bsds_distance_test():
  dy, dx, cost = matching.window_offsets(1.5)
  pts = set(zip(dy.tolist(), dx.tolist()))
  assert (1, 1) in pts and (0, 1) in pts and (2, 0) not in pts
  assert len(pts) == 9
  assert cost.tolist() == sorted(cost.tolist())
  assert cost[0] == 0
  assert dict(zip(zip(dy.tolist(), dx.tolist()), cost.tolist()))[(1, 1)] == 141
  # 0.0075 of the 1024x768 diagonal is 9.6 px (search radius 10).
  assert abs(matching.max_dist_pixels(768, 1024, 0.0075) - 9.6) < 1e-12
