"""The same per-image counts computed on BSDS `correspondPixels` (oracle).

A test oracle: it runs pyEdgeEval 0.2.8's port of the BSDS matcher (an
extra, imported lazily) once per threshold, exactly as doobscripts
`EvaluateSingle.m` (fastmode = 0) does, and derives the same count rows as
`image_eval.evaluate_image`, so both can be fed to the same aggregation.  It
is written independently of `image_eval`'s `matcher="bsds"` path, which the
tests check against it (same seed via `bsds.reseed`, same counts).  The
matcher is stochastic; results jitter by ~1e-3.
"""

import numpy as np

from relations.occlusion.metrics import image_eval
from relations.occlusion.metrics import nms
from relations.occlusion.metrics import thin


def _correspond_pixels():
  from pyEdgeEval._lib import correspond_pixels  # pylint: disable=g-import-not-at-top

  return correspond_pixels


def _pairs(match1):
  """(pred_yx [n, 2], gt_yx [n, 2]) from a 1-based column-major match map."""
  h = match1.shape[0]
  p = np.argwhere(match1 > 0)
  v = match1[p[:, 0], p[:, 1]].astype(np.int64) - 1
  return p, np.stack([v % h, v // h], 1)


def reference_counts(
  prob,
  gts,
  theta_pred=None,
  theta_gts=None,
  valids=None,
  protocol="doob",
  nthresh=99,
  max_dist=0.0075,
  border=0,
  thresholds_subset=None,
):
  """`image_eval.evaluate_image` on pyEdgeEval's matcher.

  Args: as `image_eval.evaluate_image`; `thresholds_subset` optionally
    restricts the work to some threshold indices (other rows stay 0).

  Returns:
    dict of int64 [K] count arrays (`image_eval.COUNT_KEYS`) + "thresholds".
  """
  cp = _correspond_pixels()
  prob = np.asarray(prob, np.float32)
  thr = image_eval.thresholds(nthresh)
  thr32 = thr.astype(np.float32)
  inside = image_eval.border_mask(prob.shape, border) if border else None
  gts = [np.asarray(g, bool) & inside if inside is not None else np.asarray(g, bool) for g in gts]
  if theta_gts is None:
    theta_gts = [np.zeros(prob.shape)] * len(gts)
  if theta_pred is None:
    theta_pred = np.zeros(prob.shape)
  valids = (
    [g for g in gts] if valids is None else [np.asarray(v, bool) & g for v, g in zip(valids, gts)]
  )
  if protocol == "doob":
    e = nms.edge_nms(prob)
    if inside is not None:
      e = np.where(inside, e, np.float32(0))
  else:
    e = np.where(inside, prob, 0) if inside is not None else prob
  out = {k: np.zeros(nthresh, np.int64) for k in image_eval.COUNT_KEYS}
  ks = range(nthresh) if thresholds_subset is None else thresholds_subset
  for k in ks:
    b = e >= thr32[k]
    if protocol == "seval":
      b = thin.thin(b)
    matched = np.zeros(prob.shape, bool)
    correct = np.zeros(prob.shape, bool)
    to_valid = np.zeros(prob.shape, bool)
    correct_valid = np.zeros(prob.shape, bool)
    for g, tg, v in zip(gts, theta_gts, valids):
      m1, _, _, _ = cp(b.astype(np.float64), g.astype(np.float64), max_dist=max_dist)
      p, q = _pairs(m1)
      d = np.mod(
        np.abs(
          theta_pred[p[:, 0], p[:, 1]].astype(np.float64) - tg[q[:, 0], q[:, 1]].astype(np.float64)
        ),
        2 * np.pi,
      )
      ok = (d <= np.pi / 2) | (d >= 3 * np.pi / 2)
      vq = v[q[:, 0], q[:, 1]]
      out["cnt_r"][k] += len(p)
      out["cnt_r_occ"][k] += int(ok.sum())
      out["cnt_r_valid"][k] += int(vq.sum())
      out["cnt_r_occ_valid"][k] += int((ok & vq).sum())
      matched[p[:, 0], p[:, 1]] = True
      correct[p[ok, 0], p[ok, 1]] = True
      to_valid[p[vq, 0], p[vq, 1]] = True
      correct_valid[p[ok & vq, 0], p[ok & vq, 1]] = True
    out["sum_p"][k] = int(b.sum())
    out["cnt_p"][k] = int(matched.sum())
    out["cnt_p_occ"][k] = int(correct.sum())
    out["cnt_p_occ_valid"][k] = int(correct_valid.sum())
    out["sum_p_valid"][k] = int(b.sum()) - int((matched & ~to_valid).sum())
  out["sum_r"][:] = sum(int(g.sum()) for g in gts)
  out["sum_r_valid"][:] = sum(int(v.sum()) for v in valids)
  out["thresholds"] = thr
  return out
