"""Bilinear RoI-Align on feature grids (ViT patch grids or images), jittable.

One coordinate convention for every caller: boxes are `(x1, y1, x2, y2)` fractions of the grid's
extent in [0, 1]; cell `i` covers `[i / n, (i + 1) / n)`, so its centre sits at grid coordinate `i`
(`aligned=True` RoI-Align). Each output bin averages `samples x samples` bilinear samples placed
at the bin's sub-cell centres; samples outside the grid are clamped to the border cells.

- `roi_align`: `size x size` bins per box, boxes on any of T frames (gathers the 4 neighbours).
- `roi_align_mean`: the mean over the whole box (one bin). Bilinear interpolation is separable,
  so the mean is an outer product of per-axis hat-function weights: one einsum, no gathers.
"""

import jax
import jax.numpy as jnp


def sample_positions(lo, hi, k: int, n: int):
  """Grid coordinates of `k` evenly spaced samples in `[lo, hi]`, clamped to `[0, n - 1]`.

  Args:
    lo, hi: `[...]` box edges as fractions of the grid extent.
    k: samples along the axis.
    n: cells along the axis.

  Returns:
    `[..., k]` float coordinates in cell units (cell centres at integers).
  """
  u = (jnp.arange(k) + 0.5) / k
  return jnp.clip((lo[..., None] + u * (hi - lo)[..., None]) * n - 0.5, 0, n - 1)


def roi_align(grid, frame_idx, boxes, size=2, samples=2):
  """Bilinear RoI pooling from a stack of feature grids.

  Args:
    grid: `[T, h, w, D]` features of T frames.
    frame_idx: `[...]` int frame of each box.
    boxes: `[..., 4]` normalised xyxy boxes.
    size: output bins per side.
    samples: bilinear samples per bin side (averaged).

  Returns:
    `[..., size * size, D]` pooled features.
  """
  t, h, w, d = grid.shape
  flat = grid.reshape(t * h * w, d)
  k = size * samples
  gx = sample_positions(boxes[..., 0], boxes[..., 2], k, w)  # [..., k]
  gy = sample_positions(boxes[..., 1], boxes[..., 3], k, h)
  x0 = jnp.floor(gx).astype(jnp.int32)
  y0 = jnp.floor(gy).astype(jnp.int32)
  x1 = jnp.minimum(x0 + 1, w - 1)
  y1 = jnp.minimum(y0 + 1, h - 1)
  wx = gx - x0
  wy = gy - y0
  base = frame_idx[..., None, None] * (h * w)

  def gather(yy, xx):
    idx = base + yy[..., :, None] * w + xx[..., None, :]  # [..., k, k]
    return flat[idx]  # [..., k, k, D]

  wy_, wx_ = wy[..., :, None, None], wx[..., None, :, None]
  val = (
    gather(y0, x0) * (1 - wy_) * (1 - wx_)
    + gather(y0, x1) * (1 - wy_) * wx_
    + gather(y1, x0) * wy_ * (1 - wx_)
    + gather(y1, x1) * wy_ * wx_
  )
  lead = val.shape[:-3]
  val = val.reshape(*lead, size, samples, size, samples, d).mean((-4, -2))
  return val.reshape(*lead, size * size, d)


def roi_align_mean(grid: jax.Array, boxes: jax.Array, samples: int = 4) -> jax.Array:
  """Mean of `samples x samples` bilinear samples of a feature grid inside each box.

  Args:
    grid: [B, H, W, C] features (e.g. ViT `patch_grid`).
    boxes: [B, K, 4] (x1, y1, x2, y2) as fractions of the image in [0, 1].
    samples: sampling points per axis.

  Returns:
    [B, K, C] float32.
  """
  _, h, w, _ = grid.shape

  def axis_weights(lo, hi, n):
    pos = sample_positions(lo, hi, samples, n)  # [B, K, S]
    cells = jnp.arange(n, dtype=jnp.float32)
    hat = jnp.maximum(0.0, 1.0 - jnp.abs(pos[..., None] - cells))  # [B, K, S, N]
    return hat.mean(axis=2)  # [B, K, N]

  wx = axis_weights(boxes[..., 0], boxes[..., 2], w)
  wy = axis_weights(boxes[..., 1], boxes[..., 3], h)
  return jnp.einsum("bkh,bkw,bhwc->bkc", wy, wx, grid.astype(jnp.float32))
