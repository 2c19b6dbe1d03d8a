"""Per-image boundary and orientation counts at K thresholds.

Protocols:
  "doob"  (default): doobscripts - `edge_nms` once on the soft map, no
          thinning; thresholds cut nested sets, matched in one sweep.
  "seval": `edgesEvalImg` - no NMS, `bwmorph thin` of every binary map;
          each threshold is matched on its own.
Both binarise with `E >= t` where t = linspace(1/(K+1), 1 - 1/(K+1), K); the
comparison is made in float32 (the map is single precision, as in MATLAB).

Matchers: "exact" (default; `matching.py`, maximum cardinality then minimum
cost, deterministic, one sweep for all thresholds) or "bsds" (the BSDS
`correspondPixels` C++ through pyEdgeEval, `bsds.py`, called once per
threshold and annotator as doobscripts `EvaluateSingle.m` does; it finds a
few pairs fewer and is random).  Everything else is shared.

Orientation: a matched pair (prediction p, GT q) is correct when
mod(|theta_pred(p) - theta_gt(q)|, 2 pi) <= pi/2 or >= 3 pi/2 (inclusive).
"""

import numpy as np

from relations.occlusion.metrics import bsds
from relations.occlusion.metrics import matching
from relations.occlusion.metrics import nms
from relations.occlusion.metrics import thin

PROTOCOLS = ("doob", "seval")
MATCHERS = ("exact", "bsds")
COUNT_KEYS = (
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
)


def orientation_correct(theta_pred, theta_gt):
  """doobscripts `match_theta`: mod(|a - b|, 2 pi) <= pi/2 or >= 3 pi/2.

  Args:
    theta_pred, theta_gt: float arrays (radians), broadcastable.

  Returns:
    bool array: the circular difference is at most 90 degrees (inclusive).
  """
  d = np.mod(
    np.abs(np.asarray(theta_pred, np.float64) - np.asarray(theta_gt, np.float64)), 2 * np.pi
  )
  return (d <= np.pi / 2) | (d >= 3 * np.pi / 2)


def thresholds(k=99):
  """`linspace(1/(K+1), 1 - 1/(K+1), K)` (float64 [K])."""
  return np.linspace(1.0 / (k + 1), 1.0 - 1.0 / (k + 1), k)


def border_mask(shape, border):
  """bool [H, W], True inside the image minus a `border`-pixel frame."""
  m = np.zeros(shape, bool)
  if border * 2 < shape[0] and border * 2 < shape[1]:
    m[border : shape[0] - border, border : shape[1] - border] = True
  return m


def _bsds_group(yx, bucket, kk, shape, gts, theta_gts, valids, theta_pred, max_dist, flags):
  """`matching.sweep_counts` for one group of nested sets, on the BSDS matcher.

  Calls the matcher once per threshold (ascending) and annotator, the order
  of doobscripts `EvaluateSingle.m`, and ORs the per-pixel flags of
  `matching._sweep` into `flags` uint8 [kk, len(yx)].

  Returns:
    dict of int64 [kk] GT-side counts (cnt_r, cnt_r_occ, cnt_r_valid,
    cnt_r_occ_valid), summed over annotators.
  """
  out = {
    k: np.zeros(kk, np.int64) for k in ("cnt_r", "cnt_r_occ", "cnt_r_valid", "cnt_r_occ_valid")
  }
  index = np.full(shape, -1, np.int64)
  index[yx[:, 0], yx[:, 1]] = np.arange(len(yx))
  for j in range(kk):
    pred = np.zeros(shape, bool)
    sel = yx[bucket >= j]
    pred[sel[:, 0], sel[:, 1]] = True
    for g, tg, v in zip(gts, theta_gts, valids):
      p, q = bsds.correspond(pred, g, max_dist)
      li = index[p[:, 0], p[:, 1]]
      tp = theta_pred[li] if theta_pred is not None else np.zeros(len(li))
      tq = np.asarray(tg, np.float64)[q[:, 0], q[:, 1]] if tg is not None else np.zeros(len(q))
      ok = orientation_correct(tp, tq)
      vq = v[q[:, 0], q[:, 1]]
      f = 1 | np.where(ok, 2, 0) | np.where(vq, 4, 0) | np.where(ok & vq, 8, 0)
      np.bitwise_or.at(flags[j], li, f.astype(np.uint8))
      out["cnt_r"][j] += len(li)
      out["cnt_r_occ"][j] += int(ok.sum())
      out["cnt_r_valid"][j] += int(vq.sum())
      out["cnt_r_occ_valid"][j] += int((ok & vq).sum())
  return out


def _flag_counts(out, flags, sum_p, rows):
  """Prediction-side counts of one group from its per-pixel flags."""
  matched = (flags & 1) > 0
  out["cnt_p"][rows] = matched.sum(1)
  out["cnt_p_occ"][rows] = ((flags & 2) > 0).sum(1)
  out["cnt_p_occ_valid"][rows] = ((flags & 8) > 0).sum(1)
  only_invalid = matched & ((flags & 4) == 0)
  out["sum_p_valid"][rows] = sum_p[rows] - only_invalid.sum(1)


def evaluate_image(
  prob,
  gts,
  theta_pred=None,
  theta_gts=None,
  valids=None,
  protocol="doob",
  nthresh=99,
  max_dist=0.0075,
  border=0,
  matcher="exact",
  bsds_seed=0,
):
  """Counts for one image.

  Args:
    prob: float [H, W] boundary probability in [0, 1].
    gts: list of bool [H, W] annotations (one for RealOOB / PIOD).
    theta_pred: float [H, W] predicted angle (radians) or None.
    theta_gts: list of float [H, W] GT angles, parallel to `gts`, or None.
    valids: list of bool [H, W] valid-orientation masks or None (all valid).
    protocol: "doob" or "seval".
    nthresh: number of thresholds K.
    max_dist: tolerance as a fraction of the image diagonal.
    border: pixels within this distance of the image edge are removed from
      both the prediction (after NMS) and the GT (RealOOB uses 2).
    matcher: "exact" or "bsds" (see the module docstring).
    bsds_seed: "bsds" only: seed of the BSDS matcher's generator, set before
      this image's first call (0: keep the running, clock-seeded stream).

  Returns:
    dict of int64 [K] arrays, keys `COUNT_KEYS`:
      cnt_r / sum_r: matched GT pixels / GT pixels, summed over annotators;
      cnt_p / sum_p: prediction pixels matched in any annotator / all;
      cnt_r_occ: matched GT pixels whose pair has a correct angle (sum);
      cnt_p_occ: prediction pixels with a correct pair in any annotator;
      *_valid: the same restricted to valid-orientation GT:
        cnt_r_valid / sum_r_valid: matched valid GT / valid GT pixels,
        cnt_r_occ_valid: matched valid GT pixels with a correct angle,
        cnt_p_occ_valid: predictions matched to valid GT with correct angle,
        sum_p_valid: predictions minus those matched only to invalid GT.
    plus "thresholds" float64 [K].
  """
  if protocol not in PROTOCOLS:
    raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
  if matcher not in MATCHERS:
    raise ValueError(f"matcher must be one of {MATCHERS}, got {matcher!r}")
  if matcher == "bsds":
    bsds.require()
  prob = np.asarray(prob, np.float32)
  shape = prob.shape
  for g in gts:
    if g.shape != shape:
      raise ValueError(f"GT shape {g.shape} != prediction shape {shape}")
  thr = thresholds(nthresh)
  thr32 = thr.astype(np.float32)
  inside = border_mask(shape, border) if border > 0 else None
  gts = [np.asarray(g, bool) & inside if inside is not None else np.asarray(g, bool) for g in gts]
  if theta_gts is None:
    theta_gts = [None] * len(gts)
  if valids is None:
    valids = [g for g in gts]
  valids = [np.asarray(v, bool) & g for v, g in zip(valids, gts)]
  md = matching.max_dist_pixels(shape[0], shape[1], max_dist)
  if protocol == "doob":
    e = nms.edge_nms(prob)
    if inside is not None:
      e = np.where(inside, e, np.float32(0))
    # bucket = highest k with E >= t_k (float32 comparison), -1 if none.
    yx = np.argwhere(e >= thr32[0])
    vals = e[yx[:, 0], yx[:, 1]]
    bucket = np.searchsorted(thr32, vals, side="right") - 1
    order = np.argsort(-bucket, kind="stable")
    yx, bucket = yx[order], bucket[order]
    sum_p = np.array([(bucket >= k).sum() for k in range(nthresh)], np.int64)
    groups = [(yx, bucket, nthresh, slice(None))]
  else:
    groups = []
    sum_p = np.zeros(nthresh, np.int64)
    p = np.where(inside, prob, 0) if inside is not None else prob
    for k in range(nthresh):
      b = thin.thin(p >= thr32[k])
      yx_k = np.argwhere(b)
      sum_p[k] = len(yx_k)
      groups.append((yx_k, np.zeros(len(yx_k), np.int64), 1, slice(k, k + 1)))
  out = {k: np.zeros(nthresh, np.int64) for k in COUNT_KEYS}
  out["sum_p"] = sum_p
  seeded = matcher == "bsds" and bsds_seed
  if seeded:
    bsds.LOCK.acquire()  # this image's matcher calls form one seeded stream
  try:
    if seeded:
      bsds.reseed(bsds_seed)
    for yx_g, bucket_g, kk, rows in groups:
      flags = np.zeros((kk, len(yx_g)), np.uint8)
      tp = (
        np.asarray(theta_pred, np.float64)[yx_g[:, 0], yx_g[:, 1]]
        if theta_pred is not None
        else None
      )
      if matcher == "bsds":
        res = _bsds_group(yx_g, bucket_g, kk, shape, gts, theta_gts, valids, tp, max_dist, flags)
        for key, val in res.items():
          out[key][rows] += val
      else:
        for g, tg, v in zip(gts, theta_gts, valids):
          res = matching.sweep_counts(yx_g, bucket_g, g, md, kk, tp, tg, v, flags=flags)
          for key in ("cnt_r", "cnt_r_occ", "cnt_r_valid", "cnt_r_occ_valid"):
            out[key][rows] += res[key]
      _flag_counts(out, flags, sum_p, rows)
  finally:
    if seeded:
      bsds.LOCK.release()
  out["sum_r"][:] = sum(int(g.sum()) for g in gts)
  out["sum_r_valid"][:] = sum(int(v.sum()) for v in valids)
  out["thresholds"] = thr
  return out


# Curves built from the counts: (recall num, recall den, precision num,
# precision den).  "_e", "_poc", "_aoc", "_o" are doobscripts' curves;
# "valid_poc" and "valid_orr" are the validity-aware candidates (recall over
# valid-orientation GT only).
CURVES = {
  "boundary": ("cnt_r", "sum_r", "cnt_p", "sum_p"),
  "poc": ("cnt_r", "sum_r", "cnt_p_occ", "sum_p"),
  "aoc": ("cnt_r", "sum_r", "cnt_p_occ", "cnt_p"),
  "o": ("cnt_r_occ", "sum_r", "cnt_p_occ", "sum_p"),
  "valid_poc": ("cnt_r_valid", "sum_r_valid", "cnt_p_occ_valid", "sum_p_valid"),
  "valid_orr": ("cnt_r_occ_valid", "sum_r_valid", "cnt_p_occ_valid", "sum_p_valid"),
}
