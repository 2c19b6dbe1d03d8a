"""Relation labels of a synthetic VidOR scene, derived from geometry and motion.

Per frame and ordered pair (s, o) of annotated objects, with inclusive boxes
b = (x1, y1, x2, y2), centres c, velocities v (centred difference over 2
frames of the true track centre, px/frame) and depth (smaller = nearer):

  inside(s, o)      o is a car/sofa, b_s lies within b_o (1 px slack), area_s
                    < 0.6 area_o, s drawn over o.
  in_front_of(s, o) boxes intersect by > 10% of the smaller box, s is nearer,
                    not inside, and no hold/ride between them (an occlusion).
  behind(s, o)      in_front_of(o, s).
  above(s, o)       x-overlap > 30% of the narrower box, bottom of s at most
                    15% of h_o below the top of o, vertical gap < 1.5 max h.
  beneath(s, o)     above(o, s).
  next_to(s, o)     boxes (almost) disjoint (< 5% overlap), y-overlap > 40%
                    of the shorter box, horizontal gap < 0.6 max w.
  towards(s, o)     s moves by itself (a person, animal or car that is not
                    held by or inside something), |v_s| > 0.35 px/frame
                    (x scale), cos(v_s, c_o - c_s) > 0.8, the centre
                    distance shrinks by > 0.25 px/frame, boxes disjoint,
                    |c_o - c_s| < 0.6 W, no hold/ride between them.
  away(s, o)        as towards with cos(v_s, c_s - c_o) > 0.8 and the
                    distance growing by > 0.25 px/frame.
  chase, hold, ride, lean_on   the scripts' action flags (the motion the
                    script produced: following a moving target, an item
                    moving with a person's hand, a person on a mount, a
                    tilted person touching a support).

Per (s, predicate, o) the frame mask is closed over gaps of <= 2 frames,
restricted to frames where both objects are annotated, and every run of
>= 6 frames becomes one relation instance [begin_fid, end_fid).
"""

from __future__ import annotations

import numpy as np

from relations.video_relations.data import synthetic_scene as scene_lib

SELF_MOVING = ("adult", "child", "dog", "cat", "horse", "bird", "car")
MIN_RUN = 6
MAX_GAP = 2
SPATIAL = ("above", "beneath", "behind", "in_front_of", "next_to", "inside", "towards", "away")
ACTIONS = ("chase", "hold", "ride", "lean_on")


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
  """[begin, end) of the True runs of a 1-D bool array."""
  padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
  d = np.diff(padded)
  return list(zip(np.nonzero(d == 1)[0].tolist(), np.nonzero(d == -1)[0].tolist()))


def close_gaps(mask: np.ndarray, max_gap: int = MAX_GAP) -> np.ndarray:
  """Fills False runs of length <= max_gap that lie between True runs."""
  out = mask.copy()
  runs = _runs(mask)
  for (_, e), (b, _) in zip(runs[:-1], runs[1:]):
    if b - e <= max_gap:
      out[e:b] = True
  return out


def frame_masks(
  scene: scene_lib.Scene, boxes: np.ndarray, present: np.ndarray
) -> dict[tuple[str, int, int], np.ndarray]:
  """Per-frame predicate masks for every ordered pair.

  Args:
    scene: the scene (tracks for depth, motion, categories; action flags).
    boxes: [F, K, 4] float inclusive boxes as annotated.
    present: [F, K] bool.

  Returns:
    {(predicate, s, o): [F] bool} for masks with at least one True frame
    (not yet restricted to `present`).
  """
  f, k = present.shape
  w = boxes[..., 2] - boxes[..., 0] + 1
  h = boxes[..., 3] - boxes[..., 1] + 1
  area = w * h
  cx = np.stack([t.cx for t in scene.tracks], 1)
  cy = np.stack([t.cy for t in scene.tracks], 1)
  idx = np.arange(f)
  lo, hi = np.clip(idx - 2, 0, f - 1), np.clip(idx + 2, 0, f - 1)
  dt = np.maximum(hi - lo, 1)[:, None]
  vx, vy = (cx[hi] - cx[lo]) / dt, (cy[hi] - cy[lo]) / dt
  speed = np.hypot(vx, vy)
  vmin = 0.35 * scene.scale
  depth = np.array([t.depth for t in scene.tracks])
  cats = [t.category for t in scene.tracks]
  out: dict[tuple[str, int, int], np.ndarray] = {}

  def put(pred, s, o, m):
    if m.any():
      out[(pred, s, o)] = out.get((pred, s, o), np.zeros(f, bool)) | m

  for (pred, s, o), m in scene.actions.items():
    put(pred, s, o, m)
  attached = np.zeros((k, k, f), bool)
  carried = np.zeros((k, f), bool)  # held, or inside a container
  for (pred, s, o), m in scene.actions.items():
    if pred in ("hold", "ride"):
      attached[s, o] |= m
      attached[o, s] |= m
    if pred == "hold":
      carried[o] |= m
  inside_all = np.zeros((k, k, f), bool)
  for s in range(k):
    for o in range(k):
      if s != o and cats[o] in scene_lib.CONTAINERS:
        bs, bo = boxes[:, s], boxes[:, o]
        inside_all[s, o] = (
          (bs[:, 0] >= bo[:, 0] - 1)
          & (bs[:, 1] >= bo[:, 1] - 1)
          & (bs[:, 2] <= bo[:, 2] + 1)
          & (bs[:, 3] <= bo[:, 3] + 1)
          & (area[:, s] < 0.6 * area[:, o])
          & (depth[s] < depth[o])
        )
        carried[s] |= inside_all[s, o]

  for s in range(k):
    for o in range(k):
      if s == o:
        continue
      bs, bo = boxes[:, s], boxes[:, o]
      ix = np.minimum(bs[:, 2], bo[:, 2]) - np.maximum(bs[:, 0], bo[:, 0]) + 1
      iy = np.minimum(bs[:, 3], bo[:, 3]) - np.maximum(bs[:, 1], bo[:, 1]) + 1
      inter = np.maximum(ix, 0) * np.maximum(iy, 0)
      min_area = np.minimum(area[:, s], area[:, o])
      nearer = depth[s] < depth[o]
      inside = inside_all[s, o]
      put("inside", s, o, inside)
      front = (inter > 0.1 * min_area) & nearer & ~inside & ~attached[s, o]
      put("in_front_of", s, o, front)
      put("behind", o, s, front)
      x_ov = np.maximum(ix, 0) / np.minimum(w[:, s], w[:, o])
      gap_y = bo[:, 1] - bs[:, 3]
      above = (
        (x_ov > 0.3)
        & (bs[:, 3] <= bo[:, 1] + 0.15 * h[:, o])
        & (gap_y < 1.5 * np.maximum(h[:, s], h[:, o]))
        & ~attached[s, o]
      )
      put("above", s, o, above)
      put("beneath", o, s, above)
      y_ov = np.maximum(iy, 0) / np.minimum(h[:, s], h[:, o])
      gap_x = np.maximum(bo[:, 0] - bs[:, 2], bs[:, 0] - bo[:, 2])
      put(
        "next_to",
        s,
        o,
        (inter <= 0.05 * min_area)
        & (y_ov > 0.4)
        & (gap_x < 0.6 * np.maximum(w[:, s], w[:, o]))
        & ~attached[s, o],
      )
      if cats[s] not in SELF_MOVING:
        continue
      dx, dy = cx[:, o] - cx[:, s], cy[:, o] - cy[:, s]
      dist = np.hypot(dx, dy)
      ddist = (dist[hi] - dist[lo]) / dt[:, 0]
      cos = (vx[:, s] * dx + vy[:, s] * dy) / np.maximum(speed[:, s] * dist, 1e-9)
      moving = (
        (speed[:, s] > vmin)
        & (inter == 0)
        & ~carried[s]
        & ~attached[s, o]
        & (dist < 0.6 * scene.width)
      )
      put("towards", s, o, moving & (cos > 0.8) & (ddist < -0.7 * vmin))
      put("away", s, o, moving & (cos < -0.8) & (ddist > 0.7 * vmin))
  return out


def relation_instances(
  masks: dict[tuple[str, int, int], np.ndarray], present: np.ndarray
) -> list[tuple[int, str, int, int, int]]:
  """Turns frame masks into (s, predicate, o, begin, end) instances.

  Args:
    masks: output of `frame_masks`.
    present: [F, K] bool annotated boxes.

  Returns:
    Instances sorted by (begin, s, o, predicate), end exclusive.
  """
  out = []
  for (pred, s, o), m in masks.items():
    m = close_gaps(m) & present[:, s] & present[:, o]
    for b, e in _runs(m):
      if e - b >= MIN_RUN:
        out.append((s, pred, o, b, e))
  return sorted(out, key=lambda r: (r[3], r[0], r[2], r[1]))
