"""Synthetic oriented occlusion-boundary scenes for tests, demos and bench.

A scene is a depth-ordered stack of random filled ellipses and polygons on a
background plane.  Occlusion boundaries are the single-pixel outlines of the
visible part of every shape where it occludes something farther away;
orientation follows the left-hand rule (occluder on the left when walking
along theta, image frame x right / y down): theta = atan2(n_y, n_x) - pi/2
with n the unit normal pointing from the occluder to the occluded side.
Depth is piecewise planar per shape.  The "prediction" generator imitates a
CNN: a blurred, slightly displaced copy of the GT on a smooth background,
with noisy angles and some flipped segments.
"""

import cv2
import numpy as np


def make_scene(rng, height=768, width=1024, num_shapes=12, border=2):
  """Generates one scene.

  Args:
    rng: np.random.Generator.
    height, width: image size in pixels.
    num_shapes: number of occluding shapes.
    border: GT boundaries within `border` pixels of the image edge are
      removed (RealOOB's 2-pixel exclusion).

  Returns:
    dict with "boundaries" bool [H, W], "orientation" float32 [H, W] radians
    (0 off the boundary), "valid" bool [H, W] (a random subset of whole
    shapes' boundaries, as if depth evidence were missing for the others),
    "depth" float32 [H, W] metres, "labels" int32 [H, W] (0 = background).
  """
  labels = np.zeros((height, width), np.int32)
  depth = np.empty((height, width), np.float32)
  yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
  # Background: a tilted plane far away.
  depth[:] = 8.0 + 2.0 * yy / height + rng.uniform(-1, 1) * xx / width
  dims = min(height, width)
  # Shapes are drawn far to near, so later shapes occlude earlier ones.
  base = np.sort(rng.uniform(1.0, 7.0, num_shapes))[::-1]
  for i in range(num_shapes):
    mask = np.zeros((height, width), np.uint8)
    cy = rng.uniform(0.1, 0.9) * height
    cx = rng.uniform(0.1, 0.9) * width
    if rng.random() < 0.5:
      axes = (int(rng.uniform(0.05, 0.25) * dims), int(rng.uniform(0.05, 0.25) * dims))
      cv2.ellipse(mask, (int(cx), int(cy)), axes, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    else:
      k = int(rng.integers(3, 8))
      ang = np.sort(rng.uniform(0, 2 * np.pi, k))
      rad = rng.uniform(0.05, 0.25, k) * dims
      pts = np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], -1)
      cv2.fillPoly(mask, [pts.astype(np.int32)], 1)
    m = mask.astype(bool)
    labels[m] = i + 1
    gy, gx = rng.uniform(-0.3, 0.3, 2)
    depth[m] = (base[i] + gy * (yy[m] - cy) / dims + gx * (xx[m] - cx) / dims).astype(np.float32)
  bnd, theta = boundaries_from_depth_order(labels, depth)
  if border > 0:
    bnd[:border, :] = bnd[-border:, :] = False
    bnd[:, :border] = bnd[:, -border:] = False
  theta = np.where(bnd, theta, 0.0).astype(np.float32)
  invalid_labels = rng.random(num_shapes + 1) < 0.3
  valid = bnd & ~invalid_labels[labels]
  return dict(boundaries=bnd, orientation=theta, valid=valid, depth=depth, labels=labels)


def boundaries_from_depth_order(labels, depth):
  """Single-pixel occlusion boundaries on the occluder side, with angles.

  A pixel is a boundary pixel when one of its 4-neighbours has another label
  and is farther away (larger depth).  The normal is the gradient of a
  smoothed "is farther than me" field.

  Returns:
    (bool [H, W], float32 [H, W] theta in (-pi, pi]).
  """
  h, w = labels.shape
  bnd = np.zeros((h, w), bool)
  nx = np.zeros((h, w), np.float32)
  ny = np.zeros((h, w), np.float32)
  for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0)):
    sl_c = (slice(max(0, -dy), h - max(0, dy)), slice(max(0, -dx), w - max(0, dx)))
    sl_n = (
      slice(max(0, dy), h - max(0, -dy) if dy < 0 else h),
      slice(max(0, dx), w - max(0, -dx) if dx < 0 else w),
    )
    sl_n = (
      slice(sl_c[0].start + dy, sl_c[0].stop + dy),
      slice(sl_c[1].start + dx, sl_c[1].stop + dx),
    )
    occ = (labels[sl_c] != labels[sl_n]) & (depth[sl_n] > depth[sl_c])
    bnd[sl_c] |= occ
  # Normal from the smoothed own-label indicator: it points from the occluder
  # (own label, inside) to the outside.
  for lab in np.unique(labels[bnd]):
    ind = (labels == lab).astype(np.float32)
    sm = cv2.GaussianBlur(ind, (0, 0), 2.0)
    gy, gx = np.gradient(sm)
    sel = bnd & (labels == lab)
    nx[sel] = -gx[sel]
    ny[sel] = -gy[sel]
  theta = np.arctan2(ny, nx) - np.pi / 2
  theta = np.where(theta <= -np.pi, theta + 2 * np.pi, theta)
  return bnd, theta.astype(np.float32)


def make_prediction(rng, gt, quality=0.8, flip_fraction=0.15, noise=0.15):
  """CNN-like soft prediction and dense orientation for a GT scene.

  Args:
    rng: np.random.Generator.
    gt: a `make_scene` dict.
    quality: fraction of GT boundary pixels the prediction responds to.
    flip_fraction: fraction of connected-boundary blobs whose angle is
      flipped by pi (wrong occlusion order).
    noise: amplitude of the smooth background and angle noise.

  Returns:
    (prob float32 [H, W] in [0, 1], theta float32 [H, W] radians).
  """
  bnd = gt["boundaries"]
  h, w = bnd.shape
  # Drop whole stretches of boundary (a smooth random field below its
  # `quality` quantile keeps the pixel), as a detector misses segments.
  field = cv2.GaussianBlur(rng.random((h, w)).astype(np.float32), (0, 0), 6.0)
  cut = np.quantile(field[bnd], quality) if bnd.any() else 0.0
  keep = bnd & (field <= cut)
  shift = np.float32([[1, 0, rng.integers(-1, 2)], [0, 1, rng.integers(-1, 2)]])
  src = cv2.warpAffine(keep.astype(np.float32), shift, (w, h))
  blur = cv2.GaussianBlur(src, (0, 0), 1.5)
  blur /= max(blur.max(), 1e-6)
  background = cv2.GaussianBlur(rng.random((h, w)).astype(np.float32), (0, 0), 8.0)
  background = (background - background.min()) / (np.ptp(background) + 1e-6)
  false_edges = cv2.GaussianBlur((rng.random((h, w)) < 0.0005).astype(np.float32), (0, 0), 2.0) * 20
  prob = np.clip(0.9 * blur + noise * background**3 + 0.5 * np.clip(false_edges, 0, 1), 0, 1)
  # Dense orientation: GT angle spread into the neighbourhood, plus noise.
  theta_gt = gt["orientation"]
  c = cv2.GaussianBlur(np.where(bnd, np.cos(theta_gt), 0).astype(np.float32), (0, 0), 3.0)
  s = cv2.GaussianBlur(np.where(bnd, np.sin(theta_gt), 0).astype(np.float32), (0, 0), 3.0)
  theta = np.arctan2(s, c) + rng.normal(0, 3 * noise, (h, w))
  nlab = int(gt["labels"].max()) + 1
  flip = rng.random(nlab) < flip_fraction
  theta = np.where(flip[gt["labels"]], theta + np.pi, theta)
  theta = np.mod(theta + np.pi, 2 * np.pi) - np.pi
  return prob.astype(np.float32), theta.astype(np.float32)
