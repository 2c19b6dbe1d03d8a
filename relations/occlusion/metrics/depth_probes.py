"""Depth probes of RealOOB §4.3: do depth maps know where and how OBs are?

All protocols score a predicted depth map against the GT boundaries `B`, the
valid-orientation subset `B_valid` and the GT orientation.  Depth is used
only through ratios or min-max normalisation, so any positive scale works
(metres, relative depth); <= 0 / NaN is "missing".  Choices the paper leaves
to its supplement, and ours:

(i) strict-pixel Canny (after MoDOT's pixel-exact P/R/F1): Canny edges of the
    normalised depth (see `depth_canny`), compared pixel-exactly with
    `B_valid`.  R = |E & B_valid| / |B_valid|; P = |E & B_valid| / |E minus
    (B - B_valid)| (predicted edges on boundary pixels without orientation
    evidence are ignored); F1 = 2PR / (P + R).  Mean over images.
(ii) Chamfer (after P2ORM, which uses iBims-1's depth-boundary error):
    D_gt = distance to the nearest B_valid pixel, D_est = distance to the
    nearest Canny pixel, truncated at 10 px.  dbe_acc = mean D_gt over
    Canny pixels with D_gt < 10; dbe_com = mean min(D_est, 10) over B_valid
    (10 px when there is no edge at all).  Mean over images, in pixels.
(iii) SI-BF1 (after DepthPro): ratio thresholds t = linspace(1.05, 1.25, 10)
    with weights t / sum(t).  Predicted relation "p occludes its neighbour
    p+e" for e in (right, left, down, up) when depth(p+e) / depth(p) > t.
    GT relation: p in B_valid with occluded-side normal m = (-sin theta,
    cos theta) (left-hand rule) and m.e > cos(67.5 deg).  P and R are
    averaged over the four directions, F1 from them; F1_w and R_w weight
    the thresholds.  Pixels of B - B_valid are ignored.  Mean over images.
(iv) SEval on depth-ratio edge maps: E(p) = max_e (1 - depth(p) /
    depth(p+e)), clipped to [0, 1] (the relative depth step with p as the
    near side), scored by the doob protocol against GT = B_valid; the
    orientation is generated from the same depth at the predicted pixels
    (`depth_orientation`), so it is judged jointly with localisation.
(v) Cross-boundary ordering: `depth_orientation` at the GT pixels of
    B_valid.  coverage = committed / |B_valid|; d-ord (cond.) = correct
    (<= 90 deg) / committed; d-ord (joint) = correct / |B_valid|.  Pixel
    counts pooled over images.
"""

import cv2
import numpy as np
from scipy import ndimage

from relations.occlusion.metrics import api
from relations.occlusion.metrics import depth_orientation
from relations.occlusion.metrics import image_eval

SI_T_MIN, SI_T_MAX, SI_N = 1.05, 1.25, 10
CHAMFER_MAX_PX = 10.0
_DIRS = ((0, 1), (0, -1), (1, 0), (-1, 0))  # (dy, dx): right, left, down, up


def _valid_depth(depth):
  d = np.nan_to_num(np.asarray(depth, np.float64), nan=0.0)
  return d, d > 0


def depth_canny(depth, sigma=np.sqrt(2.0), low=0.1, high=0.2):
  """Canny edges of min-max normalised depth (iBims-1 / P2ORM parameters).

  Depth is normalised to [0, 1] over valid pixels (missing -> 0), smoothed
  with a Gaussian of `sigma`, and Sobel gradients (unnormalised 3x3, as
  scikit-image's canny) are thresholded with hysteresis at `low`/`high` by
  OpenCV's Canny on fixed-point gradients (x1000).

  Returns:
    bool [H, W].
  """
  d, ok = _valid_depth(depth)
  if not ok.any():
    return np.zeros(d.shape, bool)
  lo, hi = d[ok].min(), d[ok].max()
  n = np.where(ok, (d - lo) / max(hi - lo, 1e-12), 0.0).astype(np.float32)
  n = cv2.GaussianBlur(n, (0, 0), sigma, borderType=cv2.BORDER_REFLECT)
  scale = 1000.0
  dx = np.clip(np.rint(cv2.Sobel(n, cv2.CV_32F, 1, 0, ksize=3) * scale), -32767, 32767).astype(
    np.int16
  )
  dy = np.clip(np.rint(cv2.Sobel(n, cv2.CV_32F, 0, 1, ksize=3) * scale), -32767, 32767).astype(
    np.int16
  )
  e = cv2.Canny(dx, dy, low * scale, high * scale, L2gradient=True)
  return e > 0


def strict_pixel(edges, boundaries, valid):
  """(i) R, P, F1 of edge pixels vs B_valid, pixel-exact."""
  ignore = boundaries & ~valid
  tp = int((edges & valid).sum())
  r = tp / max(int(valid.sum()), 1)
  p = tp / max(int((edges & ~ignore).sum()), 1)
  f = 2 * p * r / (p + r) if p + r > 0 else 0.0
  return dict(R=r, P=p, F1=f)


def chamfer(edges, valid, max_px=CHAMFER_MAX_PX):
  """(ii) dbe_acc, dbe_com in pixels (lower is better)."""
  if not valid.any() or not edges.any():
    return dict(dbe_acc=max_px, dbe_com=max_px)
  d_gt = ndimage.distance_transform_edt(~valid)
  d_est = ndimage.distance_transform_edt(~edges)
  near = edges & (d_gt < max_px)
  acc = float(d_gt[near].mean()) if near.any() else max_px
  com = float(np.minimum(d_est[valid], max_px).mean())
  return dict(dbe_acc=acc, dbe_com=com)


def _shift(a, dy, dx, fill):
  """out[y, x] = a[y + dy, x + dx] (fill outside)."""
  out = np.full_like(a, fill)
  h, w = a.shape
  ys = slice(max(0, -dy), h - max(0, dy))
  xs = slice(max(0, -dx), w - max(0, dx))
  yt = slice(max(0, dy), h - max(0, -dy))
  xt = slice(max(0, dx), w - max(0, -dx))
  out[ys, xs] = a[yt, xt]
  return out


def si_bf1(depth, boundaries, valid, theta_gt):
  """(iii) threshold-weighted SI-BF1: dict(F1_w, R_w)."""
  d, ok = _valid_depth(depth)
  thr = np.linspace(SI_T_MIN, SI_T_MAX, SI_N)
  weights = thr / thr.sum()
  mx = -np.sin(np.asarray(theta_gt, np.float64))
  my = np.cos(np.asarray(theta_gt, np.float64))
  cos_lim = np.cos(np.deg2rad(67.5))
  ignore = boundaries & ~valid
  f1s, rs = [], []
  for t in thr:
    ps, rr = [], []
    for dy, dx in _DIRS:
      nb = _shift(d, dy, dx, 0.0)
      nok = _shift(ok, dy, dx, False)
      pred = ok & nok & (nb > t * d) & ~ignore
      gt = valid & (mx * dx + my * dy > cos_lim)
      tp = int((pred & gt).sum())
      rr.append(tp / max(int(gt.sum()), 1))
      ps.append(tp / max(int(pred.sum()), 1))
    p, r = float(np.mean(ps)), float(np.mean(rr))
    f1s.append(2 * p * r / (p + r) if p + r > 0 else 0.0)
    rs.append(r)
  return dict(
    F1_w=float(np.sum(np.array(f1s) * weights)), R_w=float(np.sum(np.array(rs) * weights))
  )


def ratio_edge_map(depth):
  """(iv) E(p) = max over 4-neighbours of 1 - depth(p)/depth(p+e), in [0,1]."""
  d, ok = _valid_depth(depth)
  e = np.zeros(d.shape, np.float64)
  for dy, dx in _DIRS:
    nb = _shift(d, dy, dx, 0.0)
    nok = _shift(ok, dy, dx, False)
    step = np.where(ok & nok, 1.0 - d / np.where(nok, nb, 1.0), 0.0)
    e = np.maximum(e, step)
  return np.clip(e, 0, 1).astype(np.float32)


def ordering_counts(depth, valid, theta_gt, **orient_kwargs):
  """(v) counts: (|B_valid|, committed, correct)."""
  theta, commit = depth_orientation.orientation_from_depth(valid, depth, **orient_kwargs)
  ok = commit & image_eval.orientation_correct(theta, theta_gt)
  return int(valid.sum()), int(commit.sum()), int(ok.sum())


def evaluate_depth(samples, protocols=("i", "ii", "iii", "iv", "v"), num_workers=None):
  """Runs the depth probes.

  Args:
    samples: list of dicts with "depth" float [H, W] (predicted, any
      positive scale), "boundaries" bool [H, W] (B), "valid" bool [H, W]
      (B_valid), "orientation" float [H, W] GT theta (radians).
    protocols: subset of ("i", "ii", "iii", "iv", "v").
    num_workers: threads for (iv).

  Returns:
    dict of floats: R, F1 (i); dbe_acc, dbe_com (ii); F1_w, R_w (iii);
    B-ODS ... O-AP on B_valid (iv); coverage, d_ord_cond, d_ord_joint (v).
  """
  out = {}
  per = {k: [] for k in ("R", "F1", "dbe_acc", "dbe_com", "F1_w", "R_w")}
  nv = nc = nk = 0
  for s in samples:
    b = np.asarray(s["boundaries"], bool)
    v = np.asarray(s["valid"], bool) & b
    if "i" in protocols or "ii" in protocols:
      edges = depth_canny(s["depth"])
      if "i" in protocols:
        m = strict_pixel(edges, b, v)
        per["R"].append(m["R"])
        per["F1"].append(m["F1"])
      if "ii" in protocols:
        m = chamfer(edges, v)
        per["dbe_acc"].append(m["dbe_acc"])
        per["dbe_com"].append(m["dbe_com"])
    if "iii" in protocols:
      m = si_bf1(s["depth"], b, v, s["orientation"])
      per["F1_w"].append(m["F1_w"])
      per["R_w"].append(m["R_w"])
    if "v" in protocols:
      a, c, k = ordering_counts(s["depth"], v, s["orientation"])
      nv, nc, nk = nv + a, nc + c, nk + k
  for k, vals in per.items():
    if vals:
      out[k] = float(np.mean(vals))
  if "iv" in protocols:
    arr = []
    for s in samples:
      e = ratio_edge_map(s["depth"])
      theta, _ = depth_orientation.orientation_from_depth(e >= 0.01, s["depth"])
      v = np.asarray(s["valid"], bool) & np.asarray(s["boundaries"], bool)
      arr.append(dict(prob=e, theta_pred=theta, gts=[v], theta_gts=[s["orientation"]]))
    res = api.evaluate_arrays(arr, valid_only=False, with_ac=False, num_workers=num_workers)
    for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
      out[k] = res[k]
  if "v" in protocols:
    out["coverage"] = nc / max(nv, 1)
    out["d_ord_cond"] = nk / max(nc, 1)
    out["d_ord_joint"] = nk / max(nv, 1)
  return out
