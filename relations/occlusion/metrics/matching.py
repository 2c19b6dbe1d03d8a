"""Exact pixel correspondence, compiled with numba.

Definition: between prediction pixels P and ground-truth pixels G, pairs are
allowed when `dy^2 + dx^2 <= max_dist_px^2`; the matching has maximum
cardinality and, among those, minimal total cost sum(rint(100 * dist)).  This
is what BSDS `correspondPixels` approximates with a sparse random outlier
graph.

Algorithm.  We solve the lexicographic problem as a min-cost matching with
edge costs `w - BIG` (BIG exceeds any achievable cost difference, so one more
pair always beats any saving in distance).  Prediction pixels are inserted one
at a time in order of decreasing strength (the "nested-threshold
sweep"): after inserting all pixels with `E >= t_k` the current matching
is optimal for threshold k, so 99 thresholds cost one pass.  Each insertion
is one row of the Hungarian method: a Dijkstra search on the residual graph
with reduced costs (Johnson potentials), from the new pixel to the sink,
bounded by the pixel's own "stay unmatched" cost.  The search ends at a free
GT pixel (the matching grows) or at a matched prediction pixel that is
dropped for the new one (a cheaper matching of the same size); otherwise
nothing changes.  An unmatched prediction pixel can never re-enter an optimal
matching later (its private "unmatched" column is reachable only from
itself), so one search per pixel suffices.  Potential updates follow the
Jonker-Volgenant rule, touching only nodes settled before the sink.
"""

import math

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder

# Distances are weighted by 100 and rounded like BSDS match.cc.
COST_MULTIPLIER = 100
_BIG = np.int64(1) << np.int64(40)
_INF = np.int64(1) << np.int64(62)


def max_dist_pixels(height, width, max_dist):
  """`max_dist * sqrt(H^2 + W^2)`: the tolerance in pixels (BSDS rule)."""
  return max_dist * math.sqrt(height * height + width * width)


def window_offsets(max_dist_px):
  """Window offsets within the tolerance, sorted by cost.

  Returns:
    (dy int32 [n], dx int32 [n], cost int64 [n]) with dy^2+dx^2 <=
    max_dist_px^2 (the BSDS test in doubles) and cost = rint(100 * dist).
  """
  r = int(math.ceil(max_dist_px))
  dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
  dy = dy.ravel()
  dx = dx.ravel()
  d2 = (dy * dy + dx * dx).astype(np.float64)
  keep = d2 <= max_dist_px * max_dist_px
  dy, dx, d2 = dy[keep], dx[keep], d2[keep]
  cost = np.rint(np.sqrt(d2) * COST_MULTIPLIER).astype(np.int64)
  order = np.lexsort((dx, dy, cost))
  return (dy[order].astype(np.int32), dx[order].astype(np.int32), cost[order])


@numba.njit(cache=True, nogil=True)
def _build_adjacency(py, px, gt_index, ody, odx, ocost):
  """CSR adjacency from prediction pixels to GT node ids within the window."""
  h, w = gt_index.shape
  n = py.shape[0]
  start = np.zeros(n + 1, np.int64)
  cap = max(16, n * 8)
  nbr = np.empty(cap, np.int32)
  wgt = np.empty(cap, np.int64)
  m = 0
  for i in range(n):
    y = py[i]
    x = px[i]
    for k in range(ody.shape[0]):
      yy = y + ody[k]
      xx = x + odx[k]
      if yy < 0 or yy >= h or xx < 0 or xx >= w:
        continue
      g = gt_index[yy, xx]
      if g < 0:
        continue
      if m == cap:
        cap *= 2
        nbr2 = np.empty(cap, np.int32)
        wgt2 = np.empty(cap, np.int64)
        nbr2[:m] = nbr[:m]
        wgt2[:m] = wgt[:m]
        nbr = nbr2
        wgt = wgt2
      nbr[m] = g
      wgt[m] = ocost[k]
      m += 1
    start[i + 1] = m
  return start, nbr[:m].copy(), wgt[:m].copy()


@numba.njit(cache=True, nogil=True)
def _heap_push(hk, hv, size, key, val):
  i = size
  hk[i] = key
  hv[i] = val
  while i > 0:
    p = (i - 1) >> 1
    if hk[p] <= hk[i]:
      break
    hk[p], hk[i] = hk[i], hk[p]
    hv[p], hv[i] = hv[i], hv[p]
    i = p
  return size + 1


@numba.njit(cache=True, nogil=True)
def _heap_pop(hk, hv, size):
  key = hk[0]
  val = hv[0]
  size -= 1
  if size > 0:
    hk[0] = hk[size]
    hv[0] = hv[size]
    i = 0
    while True:
      c = 2 * i + 1
      if c >= size:
        break
      if c + 1 < size and hk[c + 1] < hk[c]:
        c += 1
      if hk[i] <= hk[c]:
        break
      hk[c], hk[i] = hk[i], hk[c]
      hv[c], hv[i] = hv[i], hv[c]
      i = c
  return key, val, size


@numba.njit(cache=True, nogil=True)
def _insert(
  v,
  start,
  nbr,
  wgt,
  mate_l,
  mate_r,
  mate_w,
  pi_l,
  pi_r,
  dist,
  pred,
  pred_w,
  settled,
  touched,
  hk,
  hv,
):
  """Inserts prediction node v and restores optimality (one Hungarian row).

  Node ids: L nodes 0..nl-1, R nodes nl..nl+nr-1, sink nl+nr.  Returns the
  number of nodes settled (for statistics).
  """
  nl = mate_l.shape[0]
  nr = mate_r.shape[0]
  sink = nl + nr
  # Tightest potential keeping v's edges' reduced costs >= 0.
  best = -_INF
  for e in range(start[v], start[v + 1]):
    val = pi_r[nbr[e]] - (wgt[e] - _BIG)
    if val > best:
      best = val
  if start[v] == start[v + 1]:
    return 0
  pi_l[v] = best
  budget = best  # real cycle cost = D - budget (sink potential is 0).
  size = 0
  nset = 0
  ntouch = 1
  touched[0] = v
  dist[v] = 0
  pred[v] = -1
  size = _heap_push(hk, hv, size, np.int64(0), np.int32(v))
  found = False
  dsink = _INF
  while size > 0:
    d, x, size = _heap_pop(hk, hv, size)
    if d != dist[x]:
      continue  # stale entry
    if d >= budget:
      break
    if x == sink:
      found = True
      dsink = d
      break
    settled[nset] = x
    nset += 1
    if x < nl:
      # L node: matched nodes (other than v) may be dropped -> sink.
      if x != v and mate_l[x] >= 0:
        nd = d + pi_l[x]
        if nd < dist[sink]:
          if dist[sink] == _INF:
            touched[ntouch] = sink
            ntouch += 1
          dist[sink] = nd
          pred[sink] = x
          size = _heap_push(hk, hv, size, nd, np.int32(sink))
      pl = pi_l[x]
      ml = mate_l[x]
      for e in range(start[x], start[x + 1]):
        r = nbr[e]
        if r == ml:
          continue
        nd = d + (wgt[e] - _BIG) + pl - pi_r[r]
        node = nl + r
        if nd < dist[node]:
          if dist[node] == _INF:
            touched[ntouch] = node
            ntouch += 1
          dist[node] = nd
          pred[node] = x
          pred_w[r] = wgt[e]
          size = _heap_push(hk, hv, size, nd, np.int32(node))
    else:
      r = x - nl
      l = mate_r[r]
      if l < 0:
        nd = d + pi_r[r]
        if nd < dist[sink]:
          if dist[sink] == _INF:
            touched[ntouch] = sink
            ntouch += 1
          dist[sink] = nd
          pred[sink] = x
          size = _heap_push(hk, hv, size, nd, np.int32(sink))
      else:
        nd = d + (_BIG - mate_w[r]) + pi_r[r] - pi_l[l]
        if nd < dist[l]:
          if dist[l] == _INF:
            touched[ntouch] = l
            ntouch += 1
          dist[l] = nd
          pred[l] = x
          size = _heap_push(hk, hv, size, nd, np.int32(l))
  if found:
    # Potentials: pi += dist - D for nodes settled with dist < D.
    for i in range(nset):
      x = settled[i]
      if x < nl:
        pi_l[x] += dist[x] - dsink
      else:
        pi_r[x - nl] += dist[x] - dsink
    # Flip the alternating path.
    x = pred[sink]
    if x < nl:
      # Path ends at a matched L node that gets dropped.
      r = mate_l[x]
      mate_l[x] = -1
    else:
      r = x - nl
    while True:
      l = pred[nl + r]
      old = mate_l[l]
      mate_l[l] = r
      mate_r[r] = l
      mate_w[r] = pred_w[r]
      if l == v:
        break
      r = old
  for i in range(ntouch):
    dist[touched[i]] = _INF
  return nset


@numba.njit(cache=True, nogil=True)
def _sweep(
  start,
  nbr,
  wgt,
  bucket,
  nr,
  nthr,
  theta_p,
  theta_g,
  valid_g,
  flags,
  pred_gid,
  cnt_r,
  cnt_r_occ,
  cnt_r_valid,
  cnt_r_occ_valid,
):
  """Inserts L nodes (sorted by decreasing bucket) and records counts.

  bucket[l] = highest threshold index k with E >= t_k.  After all nodes with
  bucket >= k are in, the matching is optimal for threshold k and we record,
  per threshold: GT-side counts (cnt_r*) and per-prediction flags
  (bit 1 matched, 2 matched with correct orientation, 4 matched to a valid
  GT pixel, 8 matched to a valid GT pixel with correct orientation), OR-ed
  into `flags[k, pred_gid[l]]` so several annotators accumulate a union.
  """
  nl = start.shape[0] - 1
  mate_l = np.full(nl, -1, np.int32)
  mate_r = np.full(nr, -1, np.int32)
  mate_w = np.zeros(nr, np.int64)
  pi_l = np.zeros(nl, np.int64)
  pi_r = np.zeros(nr, np.int64)
  nn = nl + nr + 1
  dist = np.full(nn, _INF, np.int64)
  pred = np.full(nn, -1, np.int32)
  pred_w = np.zeros(nr, np.int64)
  settled = np.empty(nn, np.int32)
  touched = np.empty(nn, np.int32)
  hcap = nbr.shape[0] + 2 * nn + 8
  hk = np.empty(hcap, np.int64)
  hv = np.empty(hcap, np.int32)
  half_pi = np.pi / 2
  three_half_pi = 3 * np.pi / 2
  two_pi = 2 * np.pi
  total_settled = 0
  i = 0
  for k in range(nthr - 1, -1, -1):
    while i < nl and bucket[i] >= k:
      total_settled += _insert(
        i,
        start,
        nbr,
        wgt,
        mate_l,
        mate_r,
        mate_w,
        pi_l,
        pi_r,
        dist,
        pred,
        pred_w,
        settled,
        touched,
        hk,
        hv,
      )
      i += 1
    c = 0
    co = 0
    cv = 0
    cov = 0
    for r in range(nr):
      l = mate_r[r]
      if l < 0:
        continue
      # doobscripts match_theta: mod(|a - b|, 2 pi) <= pi/2 or >= 3 pi/2.
      dd = abs(np.float64(theta_p[l]) - np.float64(theta_g[r])) % two_pi
      ok = dd <= half_pi or dd >= three_half_pi
      f = 1
      c += 1
      if ok:
        co += 1
        f |= 2
      if valid_g[r]:
        cv += 1
        f |= 4
        if ok:
          cov += 1
          f |= 8
      flags[k, pred_gid[l]] |= f
    cnt_r[k] += c
    cnt_r_occ[k] += co
    cnt_r_valid[k] += cv
    cnt_r_occ_valid[k] += cov
  return total_settled


def prepare_graph(pred_yx, gt_mask, max_dist_px):
  """Builds the candidate-pair graph.

  Args:
    pred_yx: int [n, 2] prediction pixel coordinates (in insertion order).
    gt_mask: bool [H, W] ground truth.
    max_dist_px: tolerance in pixels.

  Returns:
    dict with `gt_yx` int32 [m, 2] (row-major order of GT pixels), `keep`
    (indices into pred_yx of matchable pixels), and CSR `start`, `nbr`,
    `wgt` over the kept pixels.
  """
  gt_yx = np.argwhere(gt_mask).astype(np.int32)
  gt_index = np.full(gt_mask.shape, -1, np.int32)
  gt_index[gt_yx[:, 0], gt_yx[:, 1]] = np.arange(len(gt_yx), dtype=np.int32)
  ody, odx, ocost = window_offsets(max_dist_px)
  py = np.ascontiguousarray(pred_yx[:, 0], np.int32)
  px = np.ascontiguousarray(pred_yx[:, 1], np.int32)
  start, nbr, wgt = _build_adjacency(py, px, gt_index, ody, odx, ocost)
  deg = np.diff(start)
  keep = np.nonzero(deg > 0)[0]
  if len(keep) < len(deg):
    start = np.concatenate([[0], np.cumsum(deg[keep])]).astype(np.int64)
    sel = np.repeat(deg > 0, deg)
    nbr, wgt = nbr[sel], wgt[sel]
  return dict(gt_yx=gt_yx, keep=keep, start=start, nbr=nbr, wgt=wgt)


def sweep_counts(
  pred_yx,
  bucket,
  gt_mask,
  max_dist_px,
  nthr,
  theta_pred=None,
  theta_gt=None,
  valid_gt=None,
  flags=None,
):
  """Per-threshold optimal matchings for nested prediction sets.

  Args:
    pred_yx: int [n, 2] prediction pixels sorted so that `bucket` is
      non-increasing.
    bucket: int [n]; pixel i is in the prediction set of threshold k iff
      bucket[i] >= k.
    gt_mask: bool [H, W] one annotation.
    max_dist_px: tolerance in pixels.
    nthr: number of thresholds K.
    theta_pred: float [n] predicted angle per prediction pixel (radians).
    theta_gt: float [H, W] GT angle map (radians).
    valid_gt: bool [H, W] valid-orientation mask (default: all valid).
    flags: optional uint8 [K, n] to OR the per-pixel flags into (see
      `_sweep`); allocated when None.

  Returns:
    dict: `cnt_r`, `cnt_r_occ`, `cnt_r_valid`, `cnt_r_occ_valid` int64 [K]
    (matched GT pixels: all / with correct angle / valid / valid and correct),
    `flags` uint8 [K, n], `sum_r`, `sum_r_valid` (GT pixel counts).
  """
  n = len(pred_yx)
  if flags is None:
    flags = np.zeros((nthr, n), np.uint8)
  g = prepare_graph(np.asarray(pred_yx).reshape(-1, 2), gt_mask, max_dist_px)
  gt_yx = g["gt_yx"]
  keep = g["keep"]
  if theta_pred is None:
    theta_pred = np.zeros(n, np.float64)
  if theta_gt is None:
    theta_gt = np.zeros(gt_mask.shape, np.float64)
  if valid_gt is None:
    valid_gt = gt_mask
  tp = np.ascontiguousarray(np.asarray(theta_pred, np.float64)[keep])
  tg = np.ascontiguousarray(np.asarray(theta_gt, np.float64)[gt_yx[:, 0], gt_yx[:, 1]])
  vg = np.ascontiguousarray(np.asarray(valid_gt, bool)[gt_yx[:, 0], gt_yx[:, 1]])
  out = {
    k: np.zeros(nthr, np.int64) for k in ("cnt_r", "cnt_r_occ", "cnt_r_valid", "cnt_r_occ_valid")
  }
  bk = np.ascontiguousarray(np.asarray(bucket, np.int64)[keep])
  _sweep(
    g["start"],
    g["nbr"],
    g["wgt"],
    bk,
    len(gt_yx),
    nthr,
    tp,
    tg,
    vg,
    flags,
    keep.astype(np.int64),
    out["cnt_r"],
    out["cnt_r_occ"],
    out["cnt_r_valid"],
    out["cnt_r_occ_valid"],
  )
  out["flags"] = flags
  out["sum_r"] = int(len(gt_yx))
  out["sum_r_valid"] = int(vg.sum())
  return out


@numba.njit(cache=True, nogil=True)
def _match_all(start, nbr, wgt, nr, mate_out, w_out):
  nl = start.shape[0] - 1
  mate_l = np.full(nl, -1, np.int32)
  mate_r = np.full(nr, -1, np.int32)
  mate_w = np.zeros(nr, np.int64)
  pi_l = np.zeros(nl, np.int64)
  pi_r = np.zeros(nr, np.int64)
  nn = nl + nr + 1
  dist = np.full(nn, _INF, np.int64)
  pred = np.full(nn, -1, np.int32)
  pred_w = np.zeros(nr, np.int64)
  settled = np.empty(nn, np.int32)
  touched = np.empty(nn, np.int32)
  hcap = nbr.shape[0] + 2 * nn + 8
  hk = np.empty(hcap, np.int64)
  hv = np.empty(hcap, np.int32)
  for i in range(nl):
    _insert(
      i,
      start,
      nbr,
      wgt,
      mate_l,
      mate_r,
      mate_w,
      pi_l,
      pi_r,
      dist,
      pred,
      pred_w,
      settled,
      touched,
      hk,
      hv,
    )
  for i in range(nl):
    mate_out[i] = mate_l[i]
    if mate_l[i] >= 0:
      w_out[i] = mate_w[mate_l[i]]


def match_pixels(pred_mask, gt_mask, max_dist=0.0075):
  """Exact correspondence of two binary maps (a `correspondPixels` analogue).

  Args:
    pred_mask: bool [H, W] prediction.
    gt_mask: bool [H, W] ground truth.
    max_dist: tolerance as a fraction of the image diagonal.

  Returns:
    (match1, match2, cost): int64 [H, W] maps holding 1 + the row-major flat
    index of the matched pixel in the other map (0 = unmatched), and the total
    cost sum(rint(100 * dist)) of the matching.
  """
  pred_mask = np.asarray(pred_mask, bool)
  gt_mask = np.asarray(gt_mask, bool)
  if pred_mask.shape != gt_mask.shape or pred_mask.ndim != 2:
    raise ValueError(f"shapes differ: {pred_mask.shape} vs {gt_mask.shape}")
  h, w = pred_mask.shape
  pred_yx = np.argwhere(pred_mask)
  g = prepare_graph(pred_yx, gt_mask, max_dist_pixels(h, w, max_dist))
  nl = len(g["keep"])
  mate = np.full(nl, -1, np.int32)
  cost = np.zeros(nl, np.int64)
  _match_all(g["start"], g["nbr"], g["wgt"], len(g["gt_yx"]), mate, cost)
  match1 = np.zeros((h, w), np.int64)
  match2 = np.zeros((h, w), np.int64)
  ok = mate >= 0
  p = pred_yx[g["keep"][ok]]
  q = g["gt_yx"][mate[ok]]
  match1[p[:, 0], p[:, 1]] = q[:, 0] * w + q[:, 1] + 1
  match2[q[:, 0], q[:, 1]] = p[:, 0] * w + p[:, 1] + 1
  return match1, match2, int(cost[ok].sum())
