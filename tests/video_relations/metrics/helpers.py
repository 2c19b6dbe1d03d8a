"""Small builders of GT / prediction records for the VRD evaluator tests, and a table check."""

import numpy as np


def box_traj(box, n):
  """n copies of one [x1, y1, x2, y2] box."""
  return [list(box) for _ in range(n)]


def gt(triplet, duration, sub, obj):
  """One official GT relation instance (constant boxes over the duration)."""
  n = duration[1] - duration[0]
  return {
    "triplet": tuple(triplet),
    "subject_tid": 0,
    "object_tid": 1,
    "duration": tuple(duration),
    "sub_traj": box_traj(sub, n),
    "obj_traj": box_traj(obj, n),
  }


def pred(triplet, score, duration, sub, obj, n=None):
  """One prediction; `n` boxes (default: the duration's length)."""
  n = duration[1] - duration[0] if n is None else n
  return {
    "triplet": list(triplet),
    "score": score,
    "duration": list(duration),
    "sub_traj": box_traj(sub, n),
    "obj_traj": box_traj(obj, n),
  }


def assert_same_table(got, want, fields=("duration", "flags", "length")):
  """Asserts two `RelationTable`s hold the same videos, rows (triplets by name, `fields`) and
  trajectories (the boxes each row refers to; the box arrays themselves may be laid out apart)."""
  assert got.video_ids == want.video_ids
  assert got.bounds.tolist() == want.bounds.tolist()
  assert [got.triplets[i] for i in got.triplet] == [want.triplets[i] for i in want.triplet]
  for name in fields:
    np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
  for o, n, w in zip(got.offset.ravel(), got.length.ravel(), want.offset.ravel()):
    if n > 0:
      np.testing.assert_array_equal(got.boxes[o : o + n], want.boxes[w : w + n])
