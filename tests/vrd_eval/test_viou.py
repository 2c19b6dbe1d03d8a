"""Known-answer tests of the vIoU kernels (spec 1.2) and their exactness."""

import numpy as np
import pytest

from relations.evaluators.vrd import kernels
from relations.evaluators.vrd import overlaps


def _vious(pairs):
  """vIoU of [(traj_a, dur_a, traj_b, dur_b)] through the store + kernels."""
  store = overlaps.TrajectoryStore()
  ta, tb, da, db = [], [], [], []
  for a, d1, b, d2 in pairs:
    ta.append(store.add(a))
    tb.append(store.add(b))
    da.append(d1)
    db.append(d2)
  boxes, offsets, lengths, volumes = store.finalize()
  ones = np.ones(len(pairs), bool)
  return overlaps.pair_vious(boxes, offsets, lengths, volumes,
                             np.asarray(ta), np.asarray(tb),
                             np.asarray(da, np.float64),
                             np.asarray(db, np.float64), ones, ones)


def _python_viou(t1, d1, t2, d2):
  """The spec 1.2 formula written out in plain Python (reference)."""
  if d1[0] >= d2[1] or d1[1] <= d2[0]:
    return 0.
  start = max(d1[0], d2[0])
  h1, h2 = start - d1[0], start - d2[0]
  inter = 0
  for i in range(min(d1[1], d2[1]) - start):
    a, b = t1[h1 + i], t2[h2 + i]
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]) + 1)
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]) + 1)
    inter += w * h
  v1 = 0
  for a in t1:
    v1 += (a[2] - a[0] + 1) * (a[3] - a[1] + 1)
  v2 = 0
  for b in t2:
    v2 += (b[2] - b[0] + 1) * (b[3] - b[1] + 1)
  return float(inter) / (v1 + v2 - inter)


def test_known_values():
  sq = [0, 0, 9, 9]                      # 10 x 10 = 100 with the +1 rule
  shifted = [5, 5, 14, 14]               # overlaps sq in 5 x 5 = 25
  v, crash = _vious([
      ([sq] * 3, (0, 3), [sq] * 3, (0, 3)),           # identical: 1
      ([shifted] * 2, (0, 2), [sq] * 2, (0, 2)),      # 50 / (400 - 50)
      ([sq] * 2, (0, 2), [sq] * 4, (0, 4)),           # 200 / 400
      ([sq] * 5, (0, 5), [sq] * 4, (5, 9)),           # touching: disjoint
      ([sq] * 2, (0, 3), [sq] * 2, (0, 2)),           # 2 boxes for 3 frames
      # inverted box: no intersection, but "+1" area (-1) * (-1) = 1
      ([sq, [5, 5, 3, 3]], (0, 2), [sq], (0, 1)),     # 100 / (101 + 100 - 100)
  ])
  assert not crash.any()
  assert v.tolist() == [1.0, 50 / 350, 0.5, 0.0, 1.0, 100 / 101]


def test_float_boxes_bit_exact_with_python_arithmetic():
  # Values whose products and running sums round differently under a fused
  # multiply-add or a pairwise sum: the kernels must round like Python.
  rng = np.random.default_rng(3)
  pairs = []
  for _ in range(200):
    n = int(rng.integers(1, 40))
    base = rng.random((n, 2)) * 500
    wh = rng.random((n, 2)) * 200
    a = np.concatenate([base, base + wh], 1)
    b = a + rng.normal(0, 20, a.shape)
    s1 = int(rng.integers(0, 5))
    s2 = int(rng.integers(0, 5))
    pairs.append((a.tolist(), (s1, s1 + n), b.tolist(), (s2, s2 + n)))
  got, crash = _vious(pairs)
  want = [_python_viou(*p) for p in pairs]
  assert not crash.any()
  assert got.tolist() == want            # bit-identical, not approximately


def test_sequential_sums_keep_input_order():
  # 1e16 + 1 - 1e16: left to right gives 0, a pairwise/reassociated sum 1.
  vals = np.array([1e16, 1.0, -1e16, 2.0, 3.0])
  ids = np.array([0, 0, 0, 1, 1])
  assert kernels.sequential_segment_sums(vals, ids, 2).tolist() == [0.0, 5.0]


def test_crash_flags_match_official_failures():
  sq = [0, 0, 9, 9]
  v, crash = _vious([
      ([sq] * 1, (0, 3), [sq] * 3, (0, 3)),   # shared frame 1 has no box
      ([sq] * 1, (0, 3), [sq] * 3, (0, 1)),   # only frame 0 shared: fine
      ([[0, 0, -1, 5]], (0, 1), [[0, 0, -1, 5]], (0, 1)),  # 0 / 0 volumes
      ([sq] * 1, (0, 3), [sq] * 3, (7, 9)),   # disjoint: never indexed
  ])
  assert crash.tolist() == [True, False, True, False]
  assert v[1] == 100 / (100 + 300 - 100)


@pytest.mark.parametrize("a,b,want", [
    ([0, 0, 9, 9], [0, 0, 9, 9], 100.0),
    ([0, 0, 9, 9], [20, 20, 29, 29], 0.0),
    ([0.5, 0, 2.0, 0], [1.0, 0, 3.0, 0], 2.0),   # (2 - 1 + 1) * 1
])
def test_pair_intersection_areas(a, b, want):
  store = np.asarray([a, b], np.float64)
  got = kernels.pair_intersection_areas(store, np.array([0]), np.array([1]))
  assert got.tolist() == [want]
