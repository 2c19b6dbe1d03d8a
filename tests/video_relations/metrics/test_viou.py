"""Known-answer tests of the vIoU kernels and their exactness."""

import numpy as np
import pytest

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import kernels

_BOTH_INT = kernels.START_INT | kernels.END_INT


def _vious(pairs, flags=None):
  """vIoU of [(traj_a, dur_a, traj_b, dur_b)] through the store + kernels."""
  store = columns.TrajectoryStore()
  trajs, ta, tb, da, db = [], [], [], [], []
  for a, d1, b, d2 in pairs:
    for t in (a, b):
      trajs.append(store.add(t))
    ta.append(len(trajs) - 2)
    tb.append(len(trajs) - 1)
    da.append(d1)
    db.append(d2)
  offsets, lengths = np.asarray(trajs, np.int64).reshape(-1, 2).T
  if flags is None:
    flags = [(_BOTH_INT, _BOTH_INT)] * len(pairs)
  fa, fb = np.asarray(flags, np.uint8).reshape(-1, 2).T
  return kernels.pair_vious(store.boxes(), offsets, lengths, ta, tb, da, db, fa, fb)


def _python_viou(t1, d1, t2, d2):
  """The vIoU formula written out in plain Python (reference)."""
  if d1[0] >= d2[1] or d1[1] <= d2[0]:
    return 0.0
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
  sq = [0, 0, 9, 9]  # 10 x 10 = 100 with the +1 rule
  shifted = [5, 5, 14, 14]  # overlaps sq in 5 x 5 = 25
  v, status = _vious(
    [
      ([sq] * 3, (0, 3), [sq] * 3, (0, 3)),  # identical: 1
      ([shifted] * 2, (0, 2), [sq] * 2, (0, 2)),  # 50 / (400 - 50)
      ([sq] * 2, (0, 2), [sq] * 4, (0, 4)),  # 200 / 400
      ([sq] * 5, (0, 5), [sq] * 4, (5, 9)),  # touching: disjoint
      ([sq] * 2, (0, 3), [sq] * 2, (0, 2)),  # 2 boxes for 3 frames
      # inverted box: no intersection, but "+1" area (-1) * (-1) = 1
      ([sq, [5, 5, 3, 3]], (0, 2), [sq], (0, 1)),  # 100 / (101 + 100 - 100)
    ]
  )
  assert (status == kernels.OK).all()
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
  got, status = _vious(pairs)
  want = [_python_viou(*p) for p in pairs]
  assert (status == kernels.OK).all()
  assert got.tolist() == want  # bit-identical, not approximately


def test_volume_is_a_left_to_right_sum_without_fused_multiply_add():
  # Areas -1, then (1 + 2**-30) * (1 - 2**-30) = 1 - 2**-60, which rounds to
  # 1.0: Python gives -1 + 1.0 = 0.0, a fused multiply-add -2**-60.
  e = 2.0**-30
  fma_case = [[0, 0, -2, 0], [0, 0, e, -e]]
  # 1e16 + 1 - 1e16: left to right 0.0, a pairwise / reassociated sum 1.0.
  order_case = [[0, 0, 1e8 - 1, 1e8 - 1], [0, 0, 0, 0], [0, 0, -1e8 - 1, 1e8 - 1]]
  store = columns.TrajectoryStore()
  offsets, lengths = zip(store.add(fma_case), store.add(order_case))
  got = kernels.trajectory_volumes(store.boxes(), offsets, lengths)
  want = []
  for t in (fma_case, order_case):
    v = 0
    for b in t:
      v += (b[2] - b[0] + 1) * (b[3] - b[1] + 1)
    want.append(v)
  assert want == [0.0, 0.0]
  assert got.tolist() == want
  assert np.signbit(got).tolist() == [False, False]


def test_crash_status_match_official_failures():
  sq = [0, 0, 9, 9]
  v, status = _vious(
    [
      ([sq] * 1, (0, 3), [sq] * 3, (0, 3)),  # shared frame 1 has no box
      ([sq] * 1, (0, 3), [sq] * 3, (0, 1)),  # only frame 0 shared: fine
      ([[0, 0, -1, 5]], (0, 1), [[0, 0, -1, 5]], (0, 1)),  # 0 / 0 volumes
      ([sq] * 1, (0, 3), [sq] * 3, (7, 9)),  # disjoint: never indexed
      ([[0, 0, 9]], (0, 1), [sq], (0, 1)),  # not a 4-number box
      ([[0, 0, 9]], (0, 1), [sq], (2, 3)),  # ... never read: fine
    ]
  )
  assert status.tolist() == [
    kernels.INDEX_ERROR,
    kernels.OK,
    kernels.ZERO_DIVISION,
    kernels.OK,
    kernels.BAD_TRAJECTORY,
    kernels.OK,
  ]
  assert v[1] == 100 / (100 + 300 - 100)


@pytest.mark.parametrize(
  "d1,d2,raises",
  [
    ((0, 3), (1, 4), False),
    ((0.0, 3), (1, 4), True),  # range(tail_1 - head_1) of a float
    ((0, 3), (1, 4.0), False),  # e2 unused: tail_1 = e1 - s1
    ((0, 5.0), (1, 4), False),  # e1 unused: tail_1 = e2 - s1
    ((0, 3.0), (1, 4), True),
    ((2, 3), (1.0, 4), True),  # d1[0] > d2[0]: index head_2 + i float
    ((2, 3), (1.0, 2), False),  # ... disjoint, never evaluated
    ((2, 1), (1.0, 4), False),  # ... empty shared window: no indexing
  ],
)
def test_type_errors_follow_the_official_branches(d1, d2, raises):
  box = [0, 0, 9, 9]
  t1, t2 = [box] * 5, [box] * 5
  try:
    _python_viou(t1, d1, t2, d2)
    official_raises = False
  except TypeError:
    official_raises = True
  assert official_raises == raises
  flags = (columns.duration_flags(*d1), columns.duration_flags(*d2))
  _, status = _vious([(t1, d1, t2, d2)], [flags])
  assert (status[0] == kernels.TYPE_ERROR) == raises


def test_store_marks_malformed_trajectories():
  store = columns.TrajectoryStore()
  assert store.add([[0, 0, 1, 1], [2, 2, 3, 3]]) == (0, 2)
  assert store.add([[0, 0, 1, 1, 5], [2, 2, 3]]) == (0, -1)  # 5 + 3 numbers
  assert store.add(None) == (0, -1)
  assert store.add([["a", 0, 1, 1]])[1] == -1
  assert store.add([[1.5, 2, 3, 4]]) == (2, 1)
  assert store.boxes().tolist() == [[0, 0, 1, 1], [2, 2, 3, 3], [1.5, 2, 3, 4]]
