"""Small builders of GT / prediction records for the VRD evaluator tests."""


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
