"""ODS / OIS / AP aggregation exactly as `edgesEvalDir.m`.

All functions take per-image count rows `cnt_r, sum_r, cnt_p, sum_p`, each
an array [N_images, K] (or [K] for one image), and the thresholds [K].
"""

import numpy as np

_EPS = np.finfo(np.float64).eps  # MATLAB eps


def rpf(cnt_r, sum_r, cnt_p, sum_p):
  """R = cntR/max(eps,sumR), P = cntP/max(eps,sumP), F = 2PR/max(eps,P+R)."""
  cnt_r, sum_r, cnt_p, sum_p = (np.asarray(a, np.float64) for a in (cnt_r, sum_r, cnt_p, sum_p))
  r = cnt_r / np.maximum(_EPS, sum_r)
  p = cnt_p / np.maximum(_EPS, sum_p)
  return r, p, _f(p, r)


def _f(p, r):
  return 2 * p * r / np.maximum(_EPS, p + r)


def best_rpf(t, r, p):
  """ODS search of `findBestRPF`: 100-point interpolation of R and P.

  For consecutive thresholds j-1, j and a in linspace(0, 1, 100), R and P
  (and T) are interpolated linearly and F is computed from them; the first
  strictly larger F wins.

  Returns:
    (best_r, best_p, best_f, best_t) floats.
  """
  t, r, p = (np.asarray(a, np.float64) for a in (t, r, p))
  if t.size == 1:
    return float(r[0]), float(p[0]), float(_f(p, r)[0]), float(t[0])
  a = np.linspace(0, 1, 100)
  b = 1 - a
  # Rows j = 1..K-1 of the interpolation grid, same operation order as the
  # MATLAB vector code (R(j).*A + R(j-1).*B).
  rj = r[1:, None] * a + r[:-1, None] * b
  pj = p[1:, None] * a + p[:-1, None] * b
  tj = t[1:, None] * a + t[:-1, None] * b
  fj = 2 * pj * rj / np.maximum(_EPS, pj + rj)
  best_f = -1.0
  best = (0.0, 0.0, 0.0, 0.0)
  for j in range(fj.shape[0]):
    k = int(np.argmax(fj[j]))  # first maximum within the row
    if fj[j, k] > best_f:
      best_f = float(fj[j, k])
      best = (float(rj[j, k]), float(pj[j, k]), best_f, float(tj[j, k]))
  return best


def average_precision(r, p):
  """BSDS AP: unique R (first occurrence), interp1 at 0:0.01:1, /100.

  Points outside [min R, max R] are NaN in MATLAB's interp1 and are dropped;
  AP is 0 when fewer than two distinct recalls exist.
  """
  r = np.asarray(r, np.float64)
  p = np.asarray(p, np.float64)
  ur, idx = np.unique(r, return_index=True)  # sorted, first occurrence
  if ur.size <= 1:
    return 0.0
  q = np.linspace(0, 1, 101)
  vals = np.interp(q, ur, p[idx], left=np.nan, right=np.nan)
  return float(np.nansum(vals) / 100.0)


def summarize(thresholds, cnt_r, sum_r, cnt_p, sum_p):
  """ODS / OIS / AP over images.

  Args:
    thresholds: [K].
    cnt_r, sum_r, cnt_p, sum_p: [N, K] per-image counts.

  Returns:
    dict with ODS, ODS_R, ODS_P, ODS_T, OIS, OIS_R, OIS_P, AP and the
    dataset curve R, P, F ([K] lists).
  """
  cnt_r, sum_r, cnt_p, sum_p = (
    np.atleast_2d(np.asarray(a, np.float64)) for a in (cnt_r, sum_r, cnt_p, sum_p)
  )
  t = np.asarray(thresholds, np.float64)
  r, p, f = rpf(cnt_r.sum(0), sum_r.sum(0), cnt_p.sum(0), sum_p.sum(0))
  ods_r, ods_p, ods_f, ods_t = best_rpf(t, r, p)
  # OIS: each image's own first argmax of F, no interpolation.
  _, _, fi = rpf(cnt_r, sum_r, cnt_p, sum_p)
  k = np.argmax(fi, axis=1)
  rows = np.arange(cnt_r.shape[0])
  oi_r, oi_p, oi_f = rpf(
    cnt_r[rows, k].sum(), sum_r[rows, k].sum(), cnt_p[rows, k].sum(), sum_p[rows, k].sum()
  )
  return dict(
    ODS=ods_f,
    ODS_R=ods_r,
    ODS_P=ods_p,
    ODS_T=ods_t,
    OIS=float(oi_f),
    OIS_R=float(oi_r),
    OIS_P=float(oi_p),
    AP=average_precision(r, p),
    R=r.tolist(),
    P=p.tolist(),
    F=f.tolist(),
  )
