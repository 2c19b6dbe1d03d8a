"""Learnable synthetic occlusion-boundary scenes in the RealOOB layout.

  python -m relations.occlusion.data.synthetic --out DIR \
      --num_train 64 --num_test 16 [--num_hard_negatives 8] [--seed 0] \
      [--size 64x64]

Every scene is a stack of opaque planar surfaces rendered with a depth
buffer (z-buffer): a slanted background plane, convex polygons and ellipses,
thin bars (1.5-3 px wide), objects cut by the image border, and folded
sheets whose flap lies over the sheet itself (self-occlusion; the crease is a
normal discontinuity, *not* an occlusion boundary).  Appearance adds edges
that are not occlusion boundaries and that an intensity edge detector fires
on: painted stripes and dots on surfaces, soft cast shadows, the shading
change at folds and a global illumination gradient.  Hard negatives are
images of textured, shadowed background with no occlusion boundary.

Labels (`labels_from_surfaces`), computed from the rendered per-pixel maps
(depth, object id and the sheet coordinate `u` of the visible point):

* OB: pixels p, q that are 4-neighbours see different surfaces when they see
  different objects or sheet points farther apart than 1 + `_SHEET_GAP` px (a
  fold's crease keeps neighbouring sheet points adjacent, so it is no OB).  The
  nearer pixel of such a pair is the OB pixel: single-pixel, occluder side.
* Orientation (left-hand rule, image frame x right / y down): with n the sum
  of unit vectors from p to every pixel q within `_NORMAL_RADIUS` whose depth
  exceeds depth(p) by more than `_STEP_M` (the occluded side),
  theta = atan2(n_y, n_x) - pi/2, wrapped to (-pi, pi]; only pixels that
  see another surface (same rule as above, scaled by distance) count.
* Valid: the largest depth step from p to a differing 4-neighbour is at least
  `_STEP_M` metres and n is not degenerate.  Touching objects (gap < 5 cm)
  therefore give OBs with invalid orientation.
* Nothing within `BORDER` px of the image border (the RealOOB convention).

All label rules are symmetric under flips and 90-degree rotations, so labels
recomputed from a transformed scene equal the transformed labels; the input
pipeline tests rely on that.
"""

import argparse
import os
import sys

import cv2
import numpy as np

from relations import io_util
from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import realoob_io

BORDER = 2  # annotations within 2 px of the border are excluded
_STEP_M = 0.05  # depth step (m) for a valid orientation
_SHEET_GAP = 1.5  # px; sheet jumps beyond the pixel distance + this = OB
_NORMAL_RADIUS = 3  # px; neighbourhood for the orientation normal
_BG_DEPTH = (7.0, 9.0)  # metres


# ----------------------------------------------------------------------------
# Labels from per-pixel surface maps.
# ----------------------------------------------------------------------------


def _disk_offsets(radius):
  r = int(radius)
  dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
  keep = (dx * dx + dy * dy <= radius * radius) & ((dx != 0) | (dy != 0))
  return dy[keep], dx[keep]


def _shift(a, dy, dx, fill):
  """out[y, x] = a[y + dy, x + dx], `fill` outside the image."""
  h, w = a.shape
  out = np.full_like(a, fill)
  ys, yd = (slice(dy, h), slice(0, h - dy)) if dy >= 0 else (slice(0, h + dy), slice(-dy, h))
  xs, xd = (slice(dx, w), slice(0, w - dx)) if dx >= 0 else (slice(0, w + dx), slice(-dx, w))
  out[yd, xd] = a[ys, xs]
  return out


wrap_angle = occlusion_formats.to_internal_angle


def _other_surface(obj, u, dy, dx, dist):
  """Whether the pixel at offset (dy, dx) (image distance `dist`) sees another
  surface: another object, or sheet points farther apart than the pixels are
  (+ _SHEET_GAP); folding is an isometry, so a continuous sheet keeps them
  equal.  False outside the image."""
  o_q = _shift(obj, dy, dx, -1)
  u_q = np.stack([_shift(u[..., c], dy, dx, np.nan) for c in range(2)], -1)
  gap = np.sqrt(((u - u_q) ** 2).sum(-1))
  return (o_q >= 0) & ((o_q != obj) | ~(gap <= dist + _SHEET_GAP))


def labels_from_surfaces(depth, obj, u, border=BORDER):
  """Occlusion-boundary labels from visible-surface maps.

  Args:
    depth: float [H, W] metres of the visible point.
    obj: int [H, W] id of the visible object (background included).
    u: float [H, W, 2] sheet coordinate (px) of the visible point on its
      object; for rigid objects it equals the pixel position.
    border: width (px) of the excluded image border.

  Returns:
    boundaries bool [H, W], orientation float32 [H, W] radians in (-pi, pi]
    (0 off the boundary), valid bool [H, W].
  """
  depth = np.asarray(depth, np.float64)
  h, w = depth.shape
  boundary = np.zeros((h, w), bool)
  max_step = np.zeros((h, w))
  for dy, dx in ((0, 1), (1, 0), (0, -1), (-1, 0)):
    d_q = _shift(depth, dy, dx, np.nan)
    o_q = _shift(obj, dy, dx, -1)
    change = (o_q >= 0) & _other_surface(obj, u, dy, dx, 1.0)
    # The nearer pixel carries the OB; exact ties go to the lower object id
    # (a rule that does not depend on the direction, so flips commute).
    nearer = (depth < d_q) | ((depth == d_q) & (obj < o_q))
    mine = change & nearer
    boundary |= mine
    max_step = np.where(mine, np.maximum(max_step, np.nan_to_num(d_q - depth)), max_step)
  n = np.zeros((h, w, 2))
  for dy, dx in zip(*_disk_offsets(_NORMAL_RADIUS)):
    norm = np.hypot(dx, dy)
    d_q = _shift(depth, dy, dx, np.nan)
    # Only other surfaces count: a slanted flap's own farther pixels must not.
    behind = (d_q > depth + _STEP_M) & _other_surface(obj, u, dy, dx, norm)
    n[..., 0] += behind * (dx / norm)
    n[..., 1] += behind * (dy / norm)
  theta = wrap_angle(np.arctan2(n[..., 1], n[..., 0]) - np.pi / 2)
  valid = boundary & (max_step >= _STEP_M) & (np.hypot(n[..., 0], n[..., 1]) > 1e-6)
  if border > 0:
    keep = np.zeros((h, w), bool)
    keep[border : h - border, border : w - border] = True
    boundary &= keep
    valid &= keep
  theta = np.where(boundary, theta, 0.0).astype(np.float32)
  return boundary, theta, valid


# ----------------------------------------------------------------------------
# Scene rendering.
# ----------------------------------------------------------------------------


def _polygon_mask(h, w, pts):
  m = np.zeros((h, w), np.uint8)
  cv2.fillPoly(m, [np.round(pts * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
  return m.astype(bool)


def _random_shape(rng, h, w, xx, yy):
  """Returns (mask, kind) of a random convex shape; may cross the border."""
  s = min(h, w)
  kind = rng.choice(["polygon", "ellipse", "bar"], p=[0.45, 0.35, 0.2])
  cx, cy = rng.uniform(-0.1, 1.1) * w, rng.uniform(-0.1, 1.1) * h
  if kind == "bar":
    ang = rng.uniform(0, np.pi)
    half_w = rng.uniform(0.75, 1.5)
    half_l = rng.uniform(0.3, 0.8) * s
    along = (xx - cx) * np.cos(ang) + (yy - cy) * np.sin(ang)
    across = -(xx - cx) * np.sin(ang) + (yy - cy) * np.cos(ang)
    return (np.abs(along) <= half_l) & (np.abs(across) <= half_w), kind
  r = rng.uniform(0.12, 0.3) * s
  if kind == "ellipse":
    a, b = r, r * rng.uniform(0.5, 1.0)
    ang = rng.uniform(0, np.pi)
    xr = (xx - cx) * np.cos(ang) + (yy - cy) * np.sin(ang)
    yr = -(xx - cx) * np.sin(ang) + (yy - cy) * np.cos(ang)
    return (xr / a) ** 2 + (yr / b) ** 2 <= 1.0, kind
  k = rng.integers(3, 8)
  angles = np.sort(rng.uniform(0, 2 * np.pi, k))
  radii = r * rng.uniform(0.7, 1.0, k)
  pts = np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1)
  pts = cv2.convexHull(pts.astype(np.float32))[:, 0]
  return _polygon_mask(h, w, pts), kind


def _texture(rng, ux, uy, base):
  """Albedo [H, W, 3] on sheet coordinates: flat, grain, stripes or dots.

  Stripes and dots are painted (sharp, high-contrast) distractor edges.
  """
  h, w = ux.shape
  kind = rng.choice(["flat", "stripes", "dots"], p=[0.4, 0.35, 0.25])
  alb = np.broadcast_to(base, (h, w, 3)).copy()
  if kind == "stripes":
    ang = rng.uniform(0, np.pi)
    period = rng.uniform(4.0, 9.0)
    phase = (ux * np.cos(ang) + uy * np.sin(ang)) / period
    on = np.mod(phase + rng.uniform(), 1.0) < 0.5
    alb[on] = rng.uniform(0.05, 0.95, 3)
  elif kind == "dots":
    n = rng.integers(4, 12)
    color = rng.uniform(0.05, 0.95, 3)
    for _ in range(n):
      cx, cy = rng.uniform(0, w), rng.uniform(0, h)
      rad = rng.uniform(1.0, 2.5)
      alb[(ux - cx) ** 2 + (uy - cy) ** 2 <= rad * rad] = color
  # Fine grain everywhere: keeps flat regions from being trivially uniform.
  alb = alb * (1.0 + 0.04 * rng.standard_normal((h, w, 1)))
  return alb


class _Surface:
  """One surface of the z-buffer: mask, depth, object id, sheet coords."""

  def __init__(self, mask, depth, obj, ux, uy, albedo, casts_shadow):
    self.mask, self.depth, self.obj = mask, depth, obj
    self.ux, self.uy, self.albedo = ux, uy, albedo
    self.casts_shadow = casts_shadow


def _plane(rng, xx, yy, d0, max_slope):
  gx, gy = rng.uniform(-max_slope, max_slope, 2)
  return d0 + gx * (xx - xx.mean()) + gy * (yy - yy.mean())


def _fold_surfaces(rng, h, w, xx, yy, obj_id, d0, albedo_fn):
  """A convex sheet folded over itself along a line: sheet + flap surfaces."""
  s = min(h, w)
  cx, cy = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
  r = rng.uniform(0.22, 0.35) * s
  k = rng.integers(4, 8)
  angles = np.sort(rng.uniform(0, 2 * np.pi, k))
  pts = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], 1)
  sheet = _polygon_mask(h, w, pts)
  # Fold line through a point near the centre with normal nv; points with
  # signed distance t > 0 are folded onto the other side.
  a = rng.uniform(0, 2 * np.pi)
  nv = np.array([np.cos(a), np.sin(a)])
  off = rng.uniform(-0.3, 0.1) * r
  t = (xx - cx) * nv[0] + (yy - cy) * nv[1] - off
  base = sheet & (t <= 0)
  # Flap pixel at t < 0 shows the sheet point mirrored to +|t|.
  mx, my = xx - 2 * t * nv[0], yy - 2 * t * nv[1]
  mx_i = np.clip(np.round(mx).astype(int), 0, w - 1)
  my_i = np.clip(np.round(my).astype(int), 0, h - 1)
  inside = (mx >= -0.5) & (mx <= w - 0.5) & (my >= -0.5) & (my <= h - 0.5)
  flap = (t <= 0) & inside & sheet[my_i, mx_i] & (t > -r)
  # Metres per px of distance from the crease; at most 40% of the depth.
  lift = rng.uniform(0.2, 0.4) * d0 / r
  depth_base = _plane(rng, xx, yy, d0, 0.004)
  alb = albedo_fn(xx, yy)
  shade = rng.uniform(0.6, 0.8)  # the back of the sheet faces away: darker
  return [
    _Surface(base, depth_base, obj_id, xx, yy, alb, True),
    _Surface(flap, depth_base + lift * t, obj_id, mx, my, albedo_fn(mx, my) * shade, True),
  ]


def render_scene(rng, height, width, hard_negative=False):
  """Renders one scene.

  Args:
    rng: np.random.Generator.
    height, width: image size in pixels.
    hard_negative: render only the textured, shadowed background (no OB).

  Returns:
    dict with "image" uint8 [H, W, 3], "depth" float64 [H, W] metres,
    "obj" int32 [H, W], "u" float64 [H, W, 2] and the labels of
    `labels_from_surfaces`: "boundaries", "orientation", "valid".
  """
  h, w = height, width
  yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
  surfaces = []
  bg_alb = _texture(rng, xx, yy, rng.uniform(0.2, 0.8, 3))
  surfaces.append(
    _Surface(
      np.ones((h, w), bool),
      _plane(rng, xx, yy, rng.uniform(*_BG_DEPTH), 0.01),
      0,
      xx,
      yy,
      bg_alb,
      False,
    )
  )
  n_obj = 0 if hard_negative else int(rng.integers(2, 6))
  levels = np.sort(rng.uniform(1.5, 6.0, n_obj))[::-1]
  for i in range(n_obj):
    obj_id = i + 1
    base = rng.uniform(0.05, 0.95, 3)
    sub = np.random.default_rng(rng.integers(2**63))

    def albedo_fn(ux, uy, base=base, seed=sub.integers(2**63)):
      return _texture(np.random.default_rng(seed), ux, uy, base)

    if rng.uniform() < 0.2:
      surfaces += _fold_surfaces(rng, h, w, xx, yy, obj_id, levels[i], albedo_fn)
      continue
    mask, _ = _random_shape(rng, h, w, xx, yy)
    d0 = levels[i]
    if i > 0 and rng.uniform() < 0.25:
      d0 = levels[i - 1] - rng.uniform(0.005, 0.03)  # touching: invalid OB
    surfaces.append(
      _Surface(mask, _plane(rng, xx, yy, d0, 0.003), obj_id, xx, yy, albedo_fn(xx, yy), True)
    )

  # Z-buffer.
  depth = np.full((h, w), np.inf)
  obj = np.zeros((h, w), np.int32)
  u = np.zeros((h, w, 2))
  alb = np.zeros((h, w, 3))
  for s in surfaces:
    win = s.mask & (s.depth < depth)
    depth[win], obj[win] = s.depth[win], s.obj
    u[win, 0], u[win, 1] = s.ux[win], s.uy[win]
    alb[win] = s.albedo[win]

  # Shading: soft cast shadows on farther surfaces plus free-floating shadows
  # (from objects outside the view), then a global illumination gradient.
  light = np.ones((h, w))
  sdx, sdy = rng.uniform(-5, 5, 2)
  shift_m = np.float32([[1, 0, sdx], [0, 1, sdy]])
  for s in surfaces:
    if not s.casts_shadow or rng.uniform() < 0.3:
      continue
    sh = cv2.warpAffine(s.mask.astype(np.float32), shift_m, (w, h))
    sh = cv2.GaussianBlur(sh, (0, 0), rng.uniform(0.8, 2.0))
    behind = depth > s.depth + 0.1
    light *= 1.0 - rng.uniform(0.35, 0.6) * sh * behind
  for _ in range(int(rng.integers(0, 3)) + (2 if hard_negative else 0)):
    mask, _ = _random_shape(rng, h, w, xx, yy)
    sh = cv2.GaussianBlur(mask.astype(np.float32), (0, 0), rng.uniform(0.8, 2))
    light *= 1.0 - rng.uniform(0.3, 0.55) * sh
  g = rng.uniform(-0.5, 0.5, 2) / max(h, w)
  light *= 1.0 + g[0] * (xx - w / 2) + g[1] * (yy - h / 2)
  img = alb * light[..., None]
  img = cv2.GaussianBlur(img.astype(np.float32), (0, 0), 0.5)  # lens blur
  img = img + 0.01 * rng.standard_normal(img.shape)
  image = np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)

  boundaries, orientation, valid = labels_from_surfaces(depth, obj, u)
  return dict(
    image=image,
    depth=depth,
    obj=obj,
    u=u,
    boundaries=boundaries,
    orientation=orientation,
    valid=valid,
  )


# ----------------------------------------------------------------------------
# Writing the layout.
# ----------------------------------------------------------------------------


def _write_image(path, rgb):
  ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
  if not ok:
    raise OSError(f"{path}: PNG encoding failed")
  io_util.write_bytes_atomic(path, buf.tobytes())


def scene_seed(seed, split, index):
  """Per-scene seed, so any scene can be re-rendered on its own."""
  return np.random.SeedSequence([seed, {"train": 0, "test": 1, "hard_negatives": 2}[split], index])


def write_dataset(out, num_train, num_test, num_hard_negatives=0, seed=0, size=(64, 64)):
  """Writes a synthetic dataset in the RealOOB layout (with depth).

  Args:
    out: dataset root (created).
    num_train, num_test: number of scenes per split.
    num_hard_negatives: images without OBs under `hard_negatives/<id>.png`.
    seed: global seed; output is a deterministic function of the arguments.
    size: (height, width) in pixels.

  Returns:
    dict split -> list of ids.
  """
  h, w = size
  ids = {}
  for split, n in (("train", num_train), ("test", num_test)):
    ids[split] = []
    for i in range(n):
      image_id = f"{split}_{i:05d}"
      rng = np.random.default_rng(scene_seed(seed, split, i))
      sc = render_scene(rng, h, w)
      _write_image(os.path.join(out, realoob_io.IMAGES, image_id + ".png"), sc["image"])
      realoob_io.write_gt(
        out, image_id, sc["boundaries"], sc["orientation"], sc["valid"], depth_m=sc["depth"]
      )
      ids[split].append(image_id)
    realoob_io.write_split(out, split, ids[split])
  ids["hard_negatives"] = []
  for i in range(num_hard_negatives):
    image_id = f"hardneg_{i:05d}"
    rng = np.random.default_rng(scene_seed(seed, "hard_negatives", i))
    sc = render_scene(rng, h, w, hard_negative=True)
    _write_image(os.path.join(out, "hard_negatives", image_id + ".png"), sc["image"])
    ids["hard_negatives"].append(image_id)
  return ids


def parse_size(text):
  """'64x96' -> (64, 96) (height x width)."""
  try:
    hs, ws = text.lower().split("x")
    h, w = int(hs), int(ws)
  except ValueError as e:
    raise ValueError(f"--size must be HxW, got {text!r}") from e
  if h < 2 * BORDER + 8 or w < 2 * BORDER + 8:
    raise ValueError(f"--size {text!r} is too small")
  return h, w


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--out", required=True)
  p.add_argument("--num_train", type=int, required=True)
  p.add_argument("--num_test", type=int, required=True)
  p.add_argument("--num_hard_negatives", type=int, default=0)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--size", default="64x64", help="HxW in pixels")
  args = p.parse_args(argv)
  ids = write_dataset(
    args.out,
    args.num_train,
    args.num_test,
    args.num_hard_negatives,
    args.seed,
    parse_size(args.size),
  )
  print(
    f"wrote {len(ids['train'])} train, {len(ids['test'])} test, "
    f"{len(ids['hard_negatives'])} hard negatives to {args.out}"
  )


if __name__ == "__main__":
  sys.exit(main())
