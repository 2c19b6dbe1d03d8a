"""Occlusion orientation from a depth map at given boundary pixels.

RealOOB (§3.2, §4.3) derives orientations "from local boundary normals and
two-sided depth samples", committing only where the depth evidence is
sufficient; its parameters are in an unpublished supplement.  Ours:

1. Normal: the principal axis of the boundary pixels within `radius` (3 px)
   of p gives the tangent; the normal n is perpendicular to it.
2. Samples: depth is read (nearest pixel) at p + s*n and p - s*n for every
   s in `distances` (2, 3, 4 px); each side's depth is the median of its
   valid (> 0) samples.  Starting beyond 1 px skips the mixed pixels that
   straddle the boundary.
3. Commit when both sides have a valid sample and the relative step
   |d+ - d-| / min(d+, d-) >= `min_rel_step` (0.05; the 5 % is the lowest
   ratio threshold of DepthPro's SI-BF1, t_min = 1.05, used in the same
   paper to call a depth step an occlusion).  The nearer side is the
   occluder; theta puts it on the left (left-hand rule, image frame):
   theta = atan2(m_y, m_x) - pi/2 with m the unit normal from the occluder
   to the occluded side.
"""

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder


@numba.njit(cache=True, nogil=True)
def _orient(bnd, depth, ys, xs, radius, dists, min_rel_step, theta, commit):
  h, w = bnd.shape
  for i in range(ys.shape[0]):
    y = ys[i]
    x = xs[i]
    # Second moments of neighbouring boundary pixels.
    sxx = 0.0
    syy = 0.0
    sxy = 0.0
    n = 0
    for dy in range(-radius, radius + 1):
      for dx in range(-radius, radius + 1):
        yy = y + dy
        xx = x + dx
        if 0 <= yy < h and 0 <= xx < w and bnd[yy, xx]:
          sxx += dx * dx
          syy += dy * dy
          sxy += dx * dy
          n += 1
    if n < 2:
      continue
    # Tangent = major axis of [[sxx, sxy], [sxy, syy]].
    ang = 0.5 * np.arctan2(2.0 * sxy, sxx - syy)
    nx = -np.sin(ang)
    ny = np.cos(ang)
    side = np.zeros(2)
    for si in range(2):
      sgn = 1.0 if si == 0 else -1.0
      vals = np.empty(dists.shape[0])
      nv = 0
      for k in range(dists.shape[0]):
        yy = int(np.rint(y + sgn * dists[k] * ny))
        xx = int(np.rint(x + sgn * dists[k] * nx))
        if 0 <= yy < h and 0 <= xx < w and depth[yy, xx] > 0:
          vals[nv] = depth[yy, xx]
          nv += 1
      side[si] = np.median(vals[:nv]) if nv > 0 else 0.0
    dp = side[0]
    dm = side[1]
    if dp <= 0 or dm <= 0:
      continue
    if abs(dp - dm) / min(dp, dm) < min_rel_step:
      continue
    # m points from the occluder (nearer side) to the occluded side.
    if dm < dp:
      mx, my = nx, ny
    else:
      mx, my = -nx, -ny
    t = np.arctan2(my, mx) - np.pi / 2
    if t <= -np.pi:
      t += 2 * np.pi
    theta[y, x] = t
    commit[y, x] = True


def orientation_from_depth(boundaries, depth, radius=3, distances=(2, 3, 4), min_rel_step=0.05):
  """Orientation at boundary pixels from depth, with a commit mask.

  Args:
    boundaries: bool [H, W] boundary pixels.
    depth: float [H, W] depth (any positive unit; <= 0 = missing).
    radius: half-size (px) of the window for the boundary normal.
    distances: sample distances (px) on each side along the normal.
    min_rel_step: minimum relative depth step to commit.

  Returns:
    (theta float32 [H, W] radians (0 where not committed),
     committed bool [H, W] subset of `boundaries`).
  """
  bnd = np.ascontiguousarray(boundaries, np.bool_)
  d = np.ascontiguousarray(np.nan_to_num(np.asarray(depth, np.float64), nan=0.0))
  if bnd.shape != d.shape:
    raise ValueError(f"boundaries {bnd.shape} and depth {d.shape} differ")
  ys, xs = np.nonzero(bnd)
  theta = np.zeros(bnd.shape, np.float64)
  commit = np.zeros(bnd.shape, np.bool_)
  _orient(
    bnd,
    d,
    ys.astype(np.int64),
    xs.astype(np.int64),
    int(radius),
    np.asarray(distances, np.float64),
    float(min_rel_step),
    theta,
    commit,
  )
  return theta.astype(np.float32), commit
