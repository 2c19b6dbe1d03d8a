"""Box conversions, IoU and generalized IoU.

Two conventions are used in this package:
- model space: `[cx, cy, w, h]` normalised to [0, 1] by image width/height;
- pixel space: `[x1, y1, x2, y2]` in pixels of the frame the box refers to.

The JAX functions are pure and jittable (used inside the loss); the `np_*`
twins run on the host (tracking, metrics) with identical formulas.
"""

import jax.numpy as jnp
import numpy as np


def cxcywh_to_xyxy(b):
  """`[..., 4]` centre/size boxes -> `[..., 4]` corner boxes (same units)."""
  cx, cy, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
  return jnp.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


def xyxy_to_cxcywh(b):
  """`[..., 4]` corner boxes -> `[..., 4]` centre/size boxes (same units)."""
  x1, y1, x2, y2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
  return jnp.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=-1)


def pairwise_iou_giou(a, b, eps=1e-7):
  """IoU and generalized IoU between every box of `a` and every box of `b`.

  Args:
    a: `[N, 4]` xyxy boxes (continuous convention, area = w * h).
    b: `[M, 4]` xyxy boxes.
    eps: guards empty unions (degenerate boxes).

  Returns:
    `(iou, giou)`, each `[N, M]`; giou is in [-1, 1] (Rezatofighi et al. 2019).
  """
  area_a = jnp.clip(a[:, 2] - a[:, 0], 0) * jnp.clip(a[:, 3] - a[:, 1], 0)
  area_b = jnp.clip(b[:, 2] - b[:, 0], 0) * jnp.clip(b[:, 3] - b[:, 1], 0)
  lt = jnp.maximum(a[:, None, :2], b[None, :, :2])
  rb = jnp.minimum(a[:, None, 2:], b[None, :, 2:])
  wh = jnp.clip(rb - lt, 0)
  inter = wh[..., 0] * wh[..., 1]
  union = area_a[:, None] + area_b[None, :] - inter
  iou = inter / (union + eps)
  hull_lt = jnp.minimum(a[:, None, :2], b[None, :, :2])
  hull_rb = jnp.maximum(a[:, None, 2:], b[None, :, 2:])
  hull_wh = jnp.clip(hull_rb - hull_lt, 0)
  hull = hull_wh[..., 0] * hull_wh[..., 1]
  giou = iou - (hull - union) / (hull + eps)
  return iou, giou


def elementwise_giou(a, b, eps=1e-7):
  """Generalized IoU of matching pairs: `a`, `b` `[..., 4]` xyxy -> `[...]`."""
  area_a = jnp.clip(a[..., 2] - a[..., 0], 0) * jnp.clip(a[..., 3] - a[..., 1], 0)
  area_b = jnp.clip(b[..., 2] - b[..., 0], 0) * jnp.clip(b[..., 3] - b[..., 1], 0)
  lt = jnp.maximum(a[..., :2], b[..., :2])
  rb = jnp.minimum(a[..., 2:], b[..., 2:])
  wh = jnp.clip(rb - lt, 0)
  inter = wh[..., 0] * wh[..., 1]
  union = area_a + area_b - inter
  iou = inter / (union + eps)
  hull_wh = jnp.clip(jnp.maximum(a[..., 2:], b[..., 2:]) - jnp.minimum(a[..., :2], b[..., :2]), 0)
  hull = hull_wh[..., 0] * hull_wh[..., 1]
  return iou - (hull - union) / (hull + eps)


def np_pairwise_iou(a, b):
  """Host IoU: `a` `[N, 4]`, `b` `[M, 4]` xyxy -> `[N, M]` float64.

  Continuous convention (area = w * h), the one the detector is trained with;
  the official vIoU's +1 convention lives in the evaluator.
  """
  a = np.asarray(a, np.float64).reshape(-1, 4)
  b = np.asarray(b, np.float64).reshape(-1, 4)
  area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
  area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
  lt = np.maximum(a[:, None, :2], b[None, :, :2])
  rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
  wh = np.clip(rb - lt, 0, None)
  inter = wh[..., 0] * wh[..., 1]
  union = area_a[:, None] + area_b[None, :] - inter
  with np.errstate(invalid="ignore", divide="ignore"):
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
  return iou


def np_cxcywh_to_xyxy(b):
  """Host twin of `cxcywh_to_xyxy`."""
  b = np.asarray(b)
  return np.stack(
    [
      b[..., 0] - b[..., 2] / 2,
      b[..., 1] - b[..., 3] / 2,
      b[..., 0] + b[..., 2] / 2,
      b[..., 1] + b[..., 3] / 2,
    ],
    -1,
  )
