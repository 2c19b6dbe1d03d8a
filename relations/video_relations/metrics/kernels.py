"""Compiled (numba) kernels of the official VidVRD scorer: vIoU and matching.

Exactness (the numbers must equal `evaluation/common.py::viou` and
`eval_detection_scores` of VidVRD-helper bit for bit, also on float boxes):

- Every value is an IEEE double and every operation is done in the order the
  official Python code does it: `(x2 - x1 + 1) * (y2 - y1 + 1)`, running sums
  `v += area` strictly frame by frame, `inter / ((v1 + v2) - inter)`. Python
  floats are IEEE doubles; integer boxes stay exact while the sums of |area|
  are below 2**53 (the kernels report larger ones, see `TOO_LARGE`).
- numba compiles without fast-math, so LLVM neither fuses `acc + w * h` into
  one multiply-add nor reassociates the sums (XLA:CPU does both, which is why
  the vIoU is not an XLA kernel: a fused multiply-add changes the last bit on
  float boxes). `tests/video_relations/metrics/test_viou.py` checks the bits.
- Python's `max(a, b)` / `min(a, b)` return `a` unless `b` compares strictly
  greater / smaller; written out as such (differs from fmax for NaN / -0.0).

Work: the matcher evaluates exactly the (prediction, GT) pairs the official
loop evaluates (same triplet, GT not yet detected, in ranked order) and reads
boxes only for pairs whose durations overlap; a trajectory's volume is
computed the first time a pair needs it, then reused (the official code
recomputes it for every pair).
"""

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder

# Status codes of a vIoU evaluation: the exception the official code raises.
OK = 0
TYPE_ERROR = 1  # a duration bound is not an int where one is needed
INDEX_ERROR = 2  # the box list does not cover the shared frames
ZERO_DIVISION = 3  # vol_1 + vol_2 - inter == 0
BAD_TRAJECTORY = 4  # the trajectory is not a list of 4-number boxes
TOO_LARGE = 5  # sum of |area| >= 2**53: integer boxes not exact

# Trajectory length of a row whose boxes are not converted yet (lazy input).
NOT_LOADED = -2

# Bits of a duration's flags: which bound is a Python int.
START_INT = 1
END_INT = 2

_EXACT_LIMIT = 2.0**53

# Functions called per pair / per box: compiled without the runtime's
# reference counting (they allocate nothing); with it every call that passes
# an array pays an incref / decref pair (measured ~4x on such loops).
_leaf = numba.njit(cache=True, nogil=True, _nrt=False)


@_leaf
def _volume(boxes, offset, length):
  """Official volume: sum over all boxes of (x2 - x1 + 1) * (y2 - y1 + 1)."""
  v = 0.0
  mag = 0.0
  for i in range(offset, offset + length):
    a = ((boxes[i, 2] - boxes[i, 0]) + 1.0) * ((boxes[i, 3] - boxes[i, 1]) + 1.0)
    v += a
    mag += abs(a)
  return v, mag


@_leaf
def _duration_types(s1, e1, f1, s2, e2, f2):
  """Where the official `viou` raises TypeError on these durations.

  Follows its branches: `range(tail_1 - head_1)` needs an int (returns
  TYPE_ERROR), and with d1[0] > d2[0] the index `head_2 + i` (head_2 =
  d1[0] - d2[0]) too, but only once the loop runs (returns INDEX_ERROR as a
  marker for "the first index into traj_2 fails"); OK otherwise.
  """
  e_sel_int = (f1 & END_INT) if e1 < e2 else (f2 & END_INT)
  if s1 <= s2:
    if (f1 & START_INT) != 0 and (f2 & START_INT) != 0 and e_sel_int != 0:
      return OK
    return TYPE_ERROR
  if (f1 & START_INT) == 0 or e_sel_int == 0:
    return TYPE_ERROR
  n = (e1 if e1 < e2 else e2) - s1
  if n <= 0 or (f2 & START_INT) != 0:
    return OK
  return INDEX_ERROR


@_leaf
def viou_one(boxes_a, off_a, len_a, vol_a, s1, e1, f1, boxes_b, off_b, len_b, vol_b, s2, e2, f2):
  """Official vIoU of trajectory a (duration [s1, e1)) and b ([s2, e2)).

  Args:
    boxes_a, boxes_b: [N, 4] float64 box stores.
    off_a, len_a: first box and number of boxes of a in boxes_a (len < 0:
      not a valid box list).
    vol_a: volume of a (`_volume`), used only when the durations overlap.
    s1, e1: duration bounds as float64; f1: START_INT / END_INT flags.
    (same for b)

  Returns:
    (viou float64, status): status OK or the official exception's code.
  """
  if s1 >= e2 or e1 <= s2:
    return 0.0, OK
  if len_a < 0 or len_b < 0:
    return 0.0, BAD_TRAJECTORY
  types = _duration_types(s1, e1, f1, s2, e2, f2)
  if types == TYPE_ERROR:
    return 0.0, TYPE_ERROR
  if types == INDEX_ERROR:
    # The loop reads traj_1[0] (head_1 = 0) first, then fails on the float
    # index into traj_2.
    return 0.0, (INDEX_ERROR if len_a == 0 else TYPE_ERROR)
  start = s2 if s1 <= s2 else s1
  n = int((e1 if e1 < e2 else e2) - start)
  inter = 0.0
  if n > 0:
    ha = off_a + int(start - s1)
    hb = off_b + int(start - s2)
    if ha - off_a + n > len_a or hb - off_b + n > len_b:
      return 0.0, INDEX_ERROR
    for i in range(n):
      a0 = boxes_a[ha + i, 0]
      a1 = boxes_a[ha + i, 1]
      a2 = boxes_a[ha + i, 2]
      a3 = boxes_a[ha + i, 3]
      b0 = boxes_b[hb + i, 0]
      b1 = boxes_b[hb + i, 1]
      b2 = boxes_b[hb + i, 2]
      b3 = boxes_b[hb + i, 3]
      left = b0 if b0 > a0 else a0
      top = b1 if b1 > a1 else a1
      right = b2 if b2 < a2 else a2
      bottom = b3 if b3 < a3 else a3
      w = (right - left) + 1.0
      h = (bottom - top) + 1.0
      w = w if w > 0.0 else 0.0
      h = h if h > 0.0 else 0.0
      inter += w * h
  denom = (vol_a + vol_b) - inter
  if denom == 0.0:
    return 0.0, ZERO_DIVISION
  return inter / denom, OK


@_leaf
def _cached_volume(boxes, offsets, lengths, vols, done, j, side, limit):
  """Volume of trajectory (j, side), computed once; False if >= limit."""
  if not done[j, side]:
    if lengths[j, side] > 0:
      v, mag = _volume(boxes, offsets[j, side], lengths[j, side])
      if not mag < limit:
        return v, False
      vols[j, side] = v
    done[j, side] = True
  return vols[j, side], True


@_leaf
def _side_viou(
  side,
  r,
  g,
  p_dur,
  p_flags,
  p_boxes,
  p_off,
  p_len,
  p_vol,
  p_done,
  g_dur,
  g_flags,
  g_boxes,
  g_off,
  g_len,
  g_vol,
  g_done,
  limit,
):
  """vIoU of the subject (side 0) or object (1) trajectories of a pair."""
  s1, e1 = p_dur[r, 0], p_dur[r, 1]
  s2, e2 = g_dur[g, 0], g_dur[g, 1]
  va = vb = 0.0
  if not (s1 >= e2 or e1 <= s2):
    va, ok_a = _cached_volume(p_boxes, p_off, p_len, p_vol, p_done, r, side, limit)
    vb, ok_b = _cached_volume(g_boxes, g_off, g_len, g_vol, g_done, g, side, limit)
    if not (ok_a and ok_b):
      return 0.0, TOO_LARGE
  return viou_one(
    p_boxes,
    p_off[r, side],
    p_len[r, side],
    va,
    s1,
    e1,
    p_flags[r],
    g_boxes,
    g_off[g, side],
    g_len[g, side],
    vb,
    s2,
    e2,
    g_flags[g],
  )


@numba.njit(cache=True, nogil=True)
def _match(
  threshold,
  limit,
  p_bounds,
  g_bounds,
  p_key,
  p_dur,
  p_flags,
  p_rel,
  p_boxes,
  p_off,
  p_len,
  g_key,
  g_dur,
  g_flags,
  g_boxes,
  g_off,
  g_len,
  matched,
  detected,
  p_vol,
  p_done,
  g_vol,
  g_done,
  state,
):
  """Greedy matching from video state[0], ranked prediction state[1].

  Stops at the first failing pair (state[4] = its status) or at the first
  pair that needs a trajectory not loaded yet (state[4] = NOT_LOADED,
  state[3] = 0 / 1 for a prediction / GT row, state[2] = that row); the
  caller loads it and calls again with the same state, which restarts that
  prediction (volumes are cached, so nothing is computed twice).
  """
  p0 = state[1]
  for v in range(state[0], len(p_bounds) - 1):
    g0 = g_bounds[v]
    num_gt = g_bounds[v + 1] - g0
    for p in range(max(p0, p_bounds[v]), p_bounds[v + 1]):
      key = p_key[p]
      if key < 0:
        continue
      r = p_rel[p]
      ov_max = -np.inf
      k_max = -1
      for k in range(num_gt):
        g = g0 + k
        if detected[g] or g_key[g] != key:
          continue
        if not (p_dur[r, 0] >= g_dur[g, 1] or p_dur[r, 1] <= g_dur[g, 0]):
          # Boxes are read: both rows must be loaded.
          missing = -1
          if p_len[r, 0] == NOT_LOADED or p_len[r, 1] == NOT_LOADED:
            missing = 0
          elif g_len[g, 0] == NOT_LOADED or g_len[g, 1] == NOT_LOADED:
            missing = 1
          if missing >= 0:
            state[0], state[1] = v, p
            state[2] = r if missing == 0 else g
            state[3], state[4] = missing, NOT_LOADED
            return
        o_iou = 0.0
        s_iou, status = _side_viou(
          0,
          r,
          g,
          p_dur,
          p_flags,
          p_boxes,
          p_off,
          p_len,
          p_vol,
          p_done,
          g_dur,
          g_flags,
          g_boxes,
          g_off,
          g_len,
          g_vol,
          g_done,
          limit,
        )
        side = 0
        if status == OK:
          side = 1
          o_iou, status = _side_viou(
            1,
            r,
            g,
            p_dur,
            p_flags,
            p_boxes,
            p_off,
            p_len,
            p_vol,
            p_done,
            g_dur,
            g_flags,
            g_boxes,
            g_off,
            g_len,
            g_vol,
            g_done,
            limit,
          )
        if status != OK:
          state[0], state[1], state[2] = v, p, k
          state[3], state[4] = side, status
          return
        ov = o_iou if o_iou < s_iou else s_iou  # Python min(s, o)
        if ov >= threshold and ov > ov_max:
          ov_max = ov
          k_max = k
      if k_max >= 0:
        matched[p] = True
        detected[g0 + k_max] = True
  state[0] = len(p_bounds) - 1
  state[4] = OK


def match(threshold, p_bounds, g_bounds, pred, gt, exact_ints=True, load=None):
  """The official greedy matching of ranked predictions to GT, all videos.

  For each video, predictions in ranked order take the not-yet-detected GT
  of the same triplet with the largest ov = min(sub vIoU, obj vIoU) >=
  threshold (the first GT on ties); a GT is consumed once.

  Args:
    threshold: vIoU threshold (0.5).
    p_bounds: [V+1] int64, ranked predictions of video v are
      p_bounds[v]:p_bounds[v+1].
    g_bounds: [V+1] int64, GT of video v are g_bounds[v]:g_bounds[v+1].
    pred: dict of the ranked predictions: "key" [P] int64 triplet id (< 0:
      no GT has it), "rel" [P] int64 row of the prediction in the arrays
      below, "dur" [R, 2] float64, "flags" [R] uint8 (START_INT | END_INT),
      "boxes" [N, 4] float64, "off" / "len" [R, 2] int64 first box and box
      count of (subject, object) (len -1: not a valid box list; NOT_LOADED:
      not converted yet, see `load`).
    gt: the same for GT rows (no "rel"; GT row g is g).
    exact_ints: boxes may be Python ints (JSON input): refuse trajectories
      whose sum of |area| reaches 2**53, where float64 would round and the
      official integer arithmetic would not. False for float64 array input
      (the official float arithmetic is float64 too).
    load: `load(which, row)` converts the trajectories of a prediction
      (which 0) or GT (1) row on demand, updating "off" / "len" in place, and
      returns the (possibly reallocated) boxes array; needed only if some
      length is NOT_LOADED.

  Returns:
    (matched [P] bool, crashes): crashes lists, per video where the official
    code fails, (video, ranked prediction, GT index within the video, side
    0 subject / 1 object, status) of the first pair it fails on; matching
    of that video stops there and goes on with the next video (the caller
    reports the first failing video in the official order).
  """
  matched = np.zeros(len(pred["key"]), np.bool_)
  detected = np.zeros(len(gt["key"]), np.bool_)
  p_vol, g_vol = np.zeros(pred["off"].shape), np.zeros(gt["off"].shape)
  p_done = np.zeros(pred["off"].shape, np.bool_)
  g_done = np.zeros(gt["off"].shape, np.bool_)
  state = np.zeros(5, np.int64)
  p_bounds = np.asarray(p_bounds, np.int64)
  g_bounds = np.asarray(g_bounds, np.int64)
  limit = _EXACT_LIMIT if exact_ints else np.inf
  p_boxes, g_boxes = pred["boxes"], gt["boxes"]
  crashes = []
  while True:
    _match(
      float(threshold),
      limit,
      p_bounds,
      g_bounds,
      pred["key"],
      pred["dur"],
      pred["flags"],
      pred["rel"],
      p_boxes,
      pred["off"],
      pred["len"],
      gt["key"],
      gt["dur"],
      gt["flags"],
      g_boxes,
      gt["off"],
      gt["len"],
      matched,
      detected,
      p_vol,
      p_done,
      g_vol,
      g_done,
      state,
    )
    if state[4] == OK:
      return matched, crashes
    if state[4] != NOT_LOADED:
      v = int(state[0])
      crashes.append(tuple(map(int, state)))
      state[0], state[1], state[4] = v + 1, p_bounds[v + 1], OK
      continue
    boxes = load(int(state[3]), int(state[2]))
    if state[3] == 0:
      p_boxes = boxes
    else:
      g_boxes = boxes


@numba.njit(cache=True, nogil=True)
def _volumes(boxes, offsets, lengths, out):
  for j in range(len(offsets)):
    if lengths[j] > 0:
      out[j], _ = _volume(boxes, offsets[j], lengths[j])


def trajectory_volumes(boxes, offsets, lengths) -> np.ndarray:
  """Official volumes: per trajectory, the running sum of "+1" box areas.

  Args:
    boxes: [N, 4] float64; offsets, lengths: [T] int64.

  Returns:
    [T] float64, sum_i (x2 - x1 + 1) * (y2 - y1 + 1) accumulated in box
    order exactly as the official `v1 += ...` loop.
  """
  out = np.zeros(len(offsets))
  _volumes(
    np.asarray(boxes, np.float64).reshape(-1, 4),
    np.asarray(offsets, np.int64),
    np.asarray(lengths, np.int64),
    out,
  )
  return out


@numba.njit(cache=True, nogil=True)
def _pair_vious(boxes, offsets, lengths, ta, tb, dur_a, dur_b, flags_a, flags_b, out, status):
  vols = np.zeros(len(offsets))
  for j in range(len(offsets)):
    if lengths[j] > 0:
      vols[j], _ = _volume(boxes, offsets[j], lengths[j])
  for k in range(len(ta)):
    a, b = ta[k], tb[k]
    out[k], status[k] = viou_one(
      boxes,
      offsets[a],
      lengths[a],
      vols[a],
      dur_a[k, 0],
      dur_a[k, 1],
      flags_a[k],
      boxes,
      offsets[b],
      lengths[b],
      vols[b],
      dur_b[k, 0],
      dur_b[k, 1],
      flags_b[k],
    )


def pair_vious(boxes, offsets, lengths, traj_a, traj_b, dur_a, dur_b, flags_a, flags_b):
  """Official vIoU of K trajectory pairs (reference / tests).

  Args:
    boxes: [N, 4] float64; offsets, lengths: [T] int64 trajectories.
    traj_a, traj_b: [K] int64 trajectory ids.
    dur_a, dur_b: [K, 2] float64 durations [start, end).
    flags_a, flags_b: [K] uint8 START_INT | END_INT.

  Returns:
    (viou [K] float64, status [K] int64), 0 where status != OK.
  """
  k = len(traj_a)
  out = np.zeros(k)
  status = np.zeros(k, np.int64)
  _pair_vious(
    np.asarray(boxes, np.float64).reshape(-1, 4),
    np.asarray(offsets, np.int64),
    np.asarray(lengths, np.int64),
    np.asarray(traj_a, np.int64),
    np.asarray(traj_b, np.int64),
    np.asarray(dur_a, np.float64).reshape(-1, 2),
    np.asarray(dur_b, np.float64).reshape(-1, 2),
    np.asarray(flags_a, np.uint8),
    np.asarray(flags_b, np.uint8),
    out,
    status,
  )
  return out, status
