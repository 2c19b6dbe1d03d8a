"""Relation head: predicate logits for (subject, object) trajectory pairs.

For each pair and each of the `L` sampled frames of a temporal segment:
RoI-aligned features of the subject, the object and their union box, pooled
from the ViT patch grid (`relations.nn.roi_align`, bilinear, jitted), plus relative
geometry (position, size, overlap). The per-frame pair features are pooled
over the frames where both are visible (mean and max); relative motion over
the segment (velocities, approach speed, change of distance and scale) and
both category distributions are appended, and an MLP gives multi-label
predicate logits (sigmoid per predicate).

Boxes are normalised xyxy in [0, 1] of the frame.
"""

import flax.linen as nn
import jax.numpy as jnp

from relations.nn.roi_align import roi_align

NUM_GEOMETRY = 14
NUM_MOTION = 12


def _cwh(b):
  return (
    (b[..., 0] + b[..., 2]) / 2,
    (b[..., 1] + b[..., 3]) / 2,
    jnp.maximum(b[..., 2] - b[..., 0], 1e-3),
    jnp.maximum(b[..., 3] - b[..., 1], 1e-3),
  )


def geometry_features(s, o):
  """Per-frame relative geometry `[..., NUM_GEOMETRY]` of boxes `s`, `o`."""
  sx, sy, sw, sh = _cwh(s)
  ox, oy, ow, oh = _cwh(o)
  iw = jnp.clip(jnp.minimum(s[..., 2], o[..., 2]) - jnp.maximum(s[..., 0], o[..., 0]), 0)
  ih = jnp.clip(jnp.minimum(s[..., 3], o[..., 3]) - jnp.maximum(s[..., 1], o[..., 1]), 0)
  inter = iw * ih
  sa, oa = sw * sh, ow * oh
  return jnp.stack(
    [
      (ox - sx) / sw,
      (oy - sy) / sh,
      jnp.log(ow / sw),
      jnp.log(oh / sh),
      inter / (sa + oa - inter),
      inter / sa,
      inter / oa,
      ox - sx,
      oy - sy,
      sx,
      sy,
      ox,
      oy,
      jnp.log(sa / oa),
    ],
    -1,
  )


def motion_features(s, o, mask, times):
  """Segment-level relative motion `[P, NUM_MOTION]`.

  Args:
    s, o: `[P, L, 4]` boxes; mask: `[P, L]` frames where both are visible;
    times: `[P, L]` time of each frame in units of the segment length (so
      features do not depend on how densely the segment is sampled).

  Velocities are per segment length, from the first to the last visible
  frame (zeros when fewer than two frames are visible).
  """
  l = mask.shape[-1]
  first = jnp.argmax(mask, -1)
  last = l - 1 - jnp.argmax(mask[:, ::-1], -1)
  t_at = lambda i: jnp.take_along_axis(times, i[:, None], axis=1)[:, 0]
  dt = jnp.maximum(t_at(last) - t_at(first), 1e-2)
  valid = (last > first).astype(jnp.float32)
  at = lambda b, i: jnp.take_along_axis(b, i[:, None, None], axis=1)[:, 0]

  def centre(b):
    x, y, w, h = _cwh(b)
    return jnp.stack([x, y], -1), jnp.log(w * h)

  (cs0, as0), (cs1, as1) = centre(at(s, first)), centre(at(s, last))
  (co0, ao0), (co1, ao1) = centre(at(o, first)), centre(at(o, last))
  vs = (cs1 - cs0) / dt[:, None]
  vo = (co1 - co0) / dt[:, None]
  d0, d1 = co0 - cs0, co1 - cs1
  n0 = jnp.linalg.norm(d0, axis=-1)
  n1 = jnp.linalg.norm(d1, axis=-1)
  unit = d0 / jnp.maximum(n0, 1e-3)[:, None]
  feats = jnp.concatenate(
    [
      vs,
      vo,
      vs - vo,
      jnp.stack(
        [
          (n1 - n0) / dt,
          (vs * unit).sum(-1),  # subject approaching
          (vo * unit).sum(-1),  # object fleeing
          (as1 - as0) / dt,
          (ao1 - ao0) / dt,
          jnp.ones_like(n0),
        ],
        -1,
      ),
    ],
    -1,
  )
  return feats * valid[:, None]


class RelationHead(nn.Module):
  """See module docstring."""

  num_predicates: int
  hidden: int = 128
  roi_size: int = 2
  roi_samples: int = 2
  use_motion: bool = True

  @nn.compact
  def __call__(self, grid, frame_idx, times, sub_boxes, obj_boxes, mask, sub_cat, obj_cat):
    """Predicate logits.

    Args:
      grid: `[T, h, w, D]` patch features of the frames of one clip/video.
      frame_idx: `[P, L]` int rows of `grid` for each pair and segment frame.
      times: `[P, L]` frame times in units of the segment length.
      sub_boxes, obj_boxes: `[P, L, 4]` normalised xyxy.
      mask: `[P, L]` bool, both boxes present in that frame.
      sub_cat, obj_cat: `[P, C]` category distributions.

    Returns:
      `[P, num_predicates]` logits.
    """
    union = jnp.concatenate(
      [
        jnp.minimum(sub_boxes[..., :2], obj_boxes[..., :2]),
        jnp.maximum(sub_boxes[..., 2:], obj_boxes[..., 2:]),
      ],
      -1,
    )
    p, l = mask.shape

    def pooled(boxes, name):
      f = roi_align(grid, frame_idx, boxes, self.roi_size, self.roi_samples)  # [P, L, r*r, D]
      return nn.Dense(self.hidden, name=name)(f.reshape(p, l, -1))

    geo = geometry_features(sub_boxes, obj_boxes)
    h = (
      pooled(sub_boxes, "roi_sub")
      + pooled(obj_boxes, "roi_obj")
      + pooled(union, "roi_union")
      + nn.Dense(self.hidden, name="geo")(geo)
    )
    h = nn.LayerNorm()(h)
    h = nn.Dense(self.hidden, name="frame_mlp")(nn.gelu(h))
    m = mask[..., None].astype(h.dtype)
    cnt = jnp.maximum(m.sum(1), 1.0)
    mean = (h * m).sum(1) / cnt
    any_visible = m.sum(1) > 0
    mx = jnp.where(any_visible, jnp.max(jnp.where(m > 0, h, -1e4), axis=1), 0.0)
    motion = motion_features(sub_boxes, obj_boxes, mask, times)
    if not self.use_motion:
      motion = jnp.zeros_like(motion)
    x = jnp.concatenate(
      [
        mean,
        mx,
        nn.Dense(self.hidden, name="motion")(motion),
        nn.Dense(self.hidden, name="categories")(jnp.concatenate([sub_cat, obj_cat], -1)),
      ],
      -1,
    )
    x = nn.gelu(nn.Dense(self.hidden, name="mlp_0")(nn.LayerNorm()(x)))
    x = nn.gelu(nn.Dense(self.hidden, name="mlp_1")(x))
    return nn.Dense(
      self.num_predicates, name="predicate", bias_init=nn.initializers.constant(-3.0)
    )(x)
