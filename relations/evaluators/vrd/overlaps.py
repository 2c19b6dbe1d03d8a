"""Trajectory store and exact vIoU of many (prediction, GT) trajectory pairs.

A trajectory is a duration `[start, end)` (end exclusive) plus a list of
boxes. The official `viou(traj_1, duration_1, traj_2, duration_2)`:

  disjoint (d1[0] >= d2[1] or d1[1] <= d2[0])  -> 0.
  n = min(ends) - max(starts); head_k = max(starts) - start_k
  inter = sum_{i < n} area(traj_1[head_1 + i] & traj_2[head_2 + i])
  vol_k = sum over ALL boxes of traj_k (not over the duration)
  viou = inter / (vol_1 + vol_2 - inter)

and raises (the whole evaluation stops) when the shared window needs a box
past the end of a list (IndexError), when the denominator is 0
(ZeroDivisionError), or when a duration bound is not an int and the
durations overlap (TypeError on `range`/indexing). `pair_vious` reports these
as flags so the caller can refuse exactly the cases the official code cannot
score. Areas come from the jitted kernels; sums are sequential (see
`kernels`).
"""

import itertools

import numpy as np

from relations.evaluators.vrd import kernels

_chain = itertools.chain.from_iterable

# Sums of integer areas are exact in float64 only below 2**53.
_EXACT_LIMIT = 2.0 ** 53


class TrajectoryStore:
  """Boxes of many trajectories in one [N, 4] float64 array."""

  def __init__(self):
    self._parts = []
    self._offsets = []
    self._lengths = []
    self._size = 0

  def add(self, boxes) -> int:
    """Appends a trajectory (list of [x1, y1, x2, y2]); returns its id."""
    n = len(boxes)
    # fromiter over the flattened boxes is the fastest exact conversion from
    # Python numbers (ints convert exactly below 2**53).
    arr = np.fromiter(_chain(boxes), np.float64, count=4 * n)
    self._parts.append(arr)
    self._offsets.append(self._size)
    self._lengths.append(n)
    self._size += n
    return len(self._lengths) - 1

  def __len__(self):
    return len(self._lengths)

  def finalize(self):
    """Returns (boxes [N, 4], offsets [T], lengths [T], volumes [T])."""
    if self._parts:
      boxes = np.concatenate(self._parts).reshape(-1, 4)
    else:
      boxes = np.zeros((0, 4))
    offsets = np.asarray(self._offsets, np.int64)
    lengths = np.asarray(self._lengths, np.int64)
    areas = kernels.box_areas(boxes)
    traj_of_box = np.repeat(np.arange(len(lengths)), lengths)
    volumes = kernels.sequential_segment_sums(areas, traj_of_box, len(lengths))
    magnitude = kernels.sequential_segment_sums(
        np.abs(areas), traj_of_box, len(lengths))
    if len(magnitude) and magnitude.max() >= _EXACT_LIMIT:
      raise ValueError(
          "box areas sum to >= 2**53 within one trajectory: coordinates too "
          "large to score exactly")
    return boxes, offsets, lengths, volumes


# Elements (frame pairs) per batch when summing intersections.
_ELEMENTS_PER_BATCH = 1 << 22


def pair_vious(boxes, offsets, lengths, volumes, traj_a, traj_b, dur_a, dur_b,
               int_a, int_b):
  """Official vIoU of K trajectory pairs.

  Args:
    boxes, offsets, lengths, volumes: from `TrajectoryStore.finalize`.
    traj_a, traj_b: [K] int trajectory ids of the two sides.
    dur_a, dur_b: [K, 2] float64 durations [start, end).
    int_a, int_b: [K] bool, both duration bounds of that side are Python ints.

  Returns:
    viou [K] float64 (0 where disjoint), crash [K] bool (the official code
    raises evaluating this pair).
  """
  k = len(traj_a)
  s1, e1 = dur_a[:, 0], dur_a[:, 1]
  s2, e2 = dur_b[:, 0], dur_b[:, 1]
  disjoint = (s1 >= e2) | (e1 <= s2)
  start = np.maximum(s1, s2)
  n = np.minimum(e1, e2) - start
  la, lb = lengths[traj_a], lengths[traj_b]
  type_error = ~disjoint & ~(int_a & int_b)
  n = np.where(disjoint | type_error, 0, n)
  n = np.maximum(n, 0).astype(np.int64)
  head_a = np.where(n > 0, start - s1, 0).astype(np.int64)
  head_b = np.where(n > 0, start - s2, 0).astype(np.int64)
  index_error = (n > 0) & ((head_a + n > la) | (head_b + n > lb))
  n = np.where(index_error, 0, n)

  inter = np.zeros(k, np.float64)
  # Batches of whole pairs: a pair's frames are summed in one bincount, in
  # frame order, so the accumulation order is the official one.
  ends = np.cumsum(n)
  first = 0
  while first < k:
    base = ends[first - 1] if first else 0
    last = int(np.searchsorted(ends, base + _ELEMENTS_PER_BATCH, "right"))
    last = max(last, first + 1)
    sl = slice(first, last)
    nb = n[sl]
    total = int(nb.sum())
    if total:
      seg = np.repeat(np.arange(last - first), nb)
      within = np.arange(total) - np.repeat(np.cumsum(nb) - nb, nb)
      idx_a = np.repeat(offsets[traj_a[sl]] + head_a[sl], nb) + within
      idx_b = np.repeat(offsets[traj_b[sl]] + head_b[sl], nb) + within
      areas = kernels.pair_intersection_areas(boxes, idx_a, idx_b)
      inter[sl] = kernels.sequential_segment_sums(areas, seg, last - first)
    first = last

  viou, zero_div = kernels.viou_from_sums(
      inter, volumes[traj_a], volumes[traj_b], disjoint | type_error)
  crash = type_error | index_error | zero_div
  return np.where(crash, 0.0, viou), crash
