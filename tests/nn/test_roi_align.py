"""RoI-Align: known answers on linear grids, and the two entry points agree."""

import jax.numpy as jnp
import numpy as np

from relations.nn import roi_align


def test_roi_align_mean_is_exact_on_a_linear_grid():
  h, w = 4, 8
  xs = jnp.broadcast_to(jnp.arange(w, dtype=jnp.float32)[None, :, None], (h, w, 1))
  grid = jnp.concatenate([xs, jnp.ones_like(xs)], -1)[None]  # [1, h, w, 2]
  boxes = jnp.array([[[0, 0, 1, 1], [2 / w, 0, 3 / w, 1], [0.25, 0.5, 0.75, 1.0]]], jnp.float32)
  out = np.asarray(roi_align.roi_align_mean(grid, boxes, samples=4))
  # Whole image: sample x = 8 * (k + .5) / 4 - .5 = 0.5, 2.5, 4.5, 6.5.
  np.testing.assert_allclose(out[0, 0], [3.5, 1.0], atol=1e-6)
  # Cell column 2: samples 1.625 .. 2.375, mean 2.
  np.testing.assert_allclose(out[0, 1], [2.0, 1.0], atol=1e-6)
  # x in [2, 6): samples 2 + (k + .5) - .5 = 2, 3, 4, 5 -> 3.5.
  np.testing.assert_allclose(out[0, 2], [3.5, 1.0], atol=1e-6)


def test_roi_align_samples_the_grid_bilinearly():
  # Grid value = x index + 10 * y index + 100 * frame, one channel.
  t, h, w = 2, 4, 6
  grid = (
    jnp.arange(w)[None, None, :]
    + 10 * jnp.arange(h)[None, :, None]
    + 100 * jnp.arange(t)[:, None, None]
  ).astype(jnp.float32)[..., None]
  box = jnp.array([[0.0, 0.0, 1.0, 1.0], [1 / 6, 1 / 4, 3 / 6, 3 / 4]])
  out = roi_align.roi_align(grid, jnp.array([1, 0]), box, size=2, samples=1)

  # Bin centres of the full frame: x in {1.5/6*6-0.5 = 1.0, 4.0},
  # y in {0.5, 2.5}; the second box: x {1.5, 2.5}... computed below.
  def expect(fr, x0, x1, y0, y1):
    xs = [x0 + (x1 - x0) * (k + 0.5) / 2 for k in range(2)]
    ys = [y0 + (y1 - y0) * (k + 0.5) / 2 for k in range(2)]
    return [100 * fr + (x * w - 0.5) + 10 * (y * h - 0.5) for y in ys for x in xs]

  np.testing.assert_allclose(out[0, :, 0], expect(1, 0, 1, 0, 1), atol=1e-5)
  np.testing.assert_allclose(out[1, :, 0], expect(0, 1 / 6, 3 / 6, 1 / 4, 3 / 4), atol=1e-5)


def test_mean_equals_one_bin_of_the_binned_version():
  # The two entry points share the coordinate convention: one bin of `roi_align` with s x s
  # samples is the mean `roi_align_mean` computes with the separable weights.
  rng = np.random.default_rng(0)
  grid = jnp.asarray(rng.normal(size=(3, 5, 7, 4)), jnp.float32)
  lo = rng.uniform(-0.1, 0.8, size=(3, 6, 2))
  hi = lo + rng.uniform(0.0, 0.6, size=(3, 6, 2))
  boxes = jnp.asarray(np.concatenate([lo, hi], -1), jnp.float32)
  mean = roi_align.roi_align_mean(grid, boxes, samples=3)
  frames = jnp.broadcast_to(jnp.arange(3)[:, None], (3, 6))
  binned = roi_align.roi_align(grid, frames, boxes, size=1, samples=3)[..., 0, :]
  np.testing.assert_allclose(np.asarray(mean), np.asarray(binned), atol=1e-5)
