"""Edge non-maximum suppression as in doobscripts `edge_nms`.

`edge_nms(E)` = `convTri(E, 4)` -> `gradient2` twice -> orientation
`mod(atan(Oyy * sign(-Oxy) / (Oxx + 1e-5)), pi)` -> `edgesNmsMex(E, O, r=1,
s=5, m=1.01)`.  MATLAB runs all of it in single precision; that is our
default (`dtype=np.float32`).  With `dtype=np.float64` every step follows
pyEdgeEval's float64 ports (`conv_tri`, `grad2`, `_lib.nms`), which is how the
tests check the kernel bit for bit against that reference.
"""

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder


def conv_tri(image, r):
  """Triangle filter `convTri(I, r)` for integer r >= 2, symmetric padding.

  Separable kernel [1 .. r+1 .. 1] / (r+1)^2 along x then y; the border pixel
  is repeated (numpy 'symmetric').

  Args:
    image: [H, W] float array; its dtype is kept.
    r: integer radius >= 2 (doobscripts uses 4).

  Returns:
    [H, W] array of the same dtype.
  """
  if r < 2 or int(r) != r:
    raise ValueError(f"conv_tri supports integer r >= 2, got {r}")
  r = int(r)
  dt = image.dtype
  f = (np.concatenate([np.arange(1, r + 2), np.arange(r, 0, -1)]) / float((r + 1) ** 2)).astype(dt)
  p = np.pad(image, ((r, r), (r, r)), mode="symmetric")
  h, w = image.shape
  # Row pass then column pass; accumulating in tap order keeps float32 sums
  # in one fixed order (the result differs from MATLAB's running-sum SSE code
  # only in the last ulp, which matters only at exact NMS ties).
  tmp = np.zeros((h + 2 * r, w), dt)
  for k in range(2 * r + 1):
    tmp += p[:, k : k + w] * f[k]
  out = np.zeros((h, w), dt)
  for k in range(2 * r + 1):
    out += tmp[k : k + h, :] * f[k]
  return out


def gradient2(image):
  """`gradient2`: (gx, gy), central differences inside, one-sided at borders."""
  gy, gx = np.gradient(image)
  return gx.astype(image.dtype, copy=False), gy.astype(image.dtype, copy=False)


def nms_orientation(edge, dtype=np.float32):
  """Edge normal orientation O in [0, pi) from `convTri(E, 4)`.

  Args:
    edge: [H, W] soft edge map.
    dtype: np.float32 (MATLAB single) or np.float64 (pyEdgeEval).

  Returns:
    [H, W] array of `dtype`, radians.
  """
  s = conv_tri(np.asarray(edge, dtype), 4)
  ox, oy = gradient2(s)
  oxx, _ = gradient2(ox)
  oxy, oyy = gradient2(oy)
  one_em5 = dtype(1e-5)
  o = np.arctan(oyy * np.sign(-oxy) / (oxx + one_em5))
  return np.mod(o, dtype(np.pi)).astype(dtype)


# Two copies of the `edgesNmsMex` kernel: every float operation is cast to
# the working precision explicitly (float32 = the MEX, float64 = pyEdgeEval).
# They are spelled out twice because numba cannot cache closures.


@numba.njit(cache=True, nogil=True)
def _interp32(img, h, w, x, y):
  # The clamp compares against a double (w - 1.001) and stores back in F,
  # exactly as the C++ does.
  xd = np.float64(x)
  yd = np.float64(y)
  if xd < 0:
    x = np.float32(0.0)
  elif xd > w - 1.001:
    x = np.float32(w - 1.001)
  if yd < 0:
    y = np.float32(0.0)
  elif yd > h - 1.001:
    y = np.float32(h - 1.001)
  x0 = int(x)
  y0 = int(y)
  x1 = x0 + 1
  y1 = y0 + 1
  dx0 = np.float32(x - np.float32(x0))
  dy0 = np.float32(y - np.float32(y0))
  dx1 = np.float32(np.float32(1.0) - dx0)
  dy1 = np.float32(np.float32(1.0) - dy0)
  a = np.float32(np.float32(img[y0, x0] * dx1) * dy1)
  b = np.float32(np.float32(img[y0, x1] * dx0) * dy1)
  c = np.float32(np.float32(img[y1, x0] * dx1) * dy0)
  d = np.float32(np.float32(img[y1, x1] * dx0) * dy0)
  return np.float32(np.float32(np.float32(a + b) + c) + d)


@numba.njit(cache=True, nogil=True)
def _kernel32(edge, ori, r, s, m):
  h, w = edge.shape
  out = np.zeros((h, w), edge.dtype)
  for y in range(h):
    for x in range(w):
      e = edge[y, x]
      out[y, x] = e
      if e == 0:
        continue
      e = np.float32(e * m)
      co = np.float32(np.cos(ori[y, x]))
      so = np.float32(np.sin(ori[y, x]))
      for d in range(-r, r + 1):
        if d == 0:
          continue
        e0 = _interp32(
          edge,
          h,
          w,
          np.float32(np.float32(x) + np.float32(np.float32(d) * co)),
          np.float32(np.float32(y) + np.float32(np.float32(d) * so)),
        )
        if e < e0:
          out[y, x] = 0
          break
  if s > w // 2:
    s = w // 2
  if s > h // 2:
    s = h // 2
  for x in range(s):
    f = np.float32(np.float32(x) / np.float32(s))
    for y in range(h):
      out[y, x] = np.float32(out[y, x] * f)
      out[y, w - 1 - x] = np.float32(out[y, w - 1 - x] * f)
  for y in range(s):
    f = np.float32(np.float32(y) / np.float32(s))
    for x in range(w):
      out[y, x] = np.float32(out[y, x] * f)
      out[h - 1 - y, x] = np.float32(out[h - 1 - y, x] * f)
  return out


@numba.njit(cache=True, nogil=True)
def _interp64(img, h, w, x, y):
  # The clamp compares against a double (w - 1.001) and stores back in F,
  # exactly as the C++ does.
  xd = np.float64(x)
  yd = np.float64(y)
  if xd < 0:
    x = np.float64(0.0)
  elif xd > w - 1.001:
    x = np.float64(w - 1.001)
  if yd < 0:
    y = np.float64(0.0)
  elif yd > h - 1.001:
    y = np.float64(h - 1.001)
  x0 = int(x)
  y0 = int(y)
  x1 = x0 + 1
  y1 = y0 + 1
  dx0 = np.float64(x - np.float64(x0))
  dy0 = np.float64(y - np.float64(y0))
  dx1 = np.float64(np.float64(1.0) - dx0)
  dy1 = np.float64(np.float64(1.0) - dy0)
  a = np.float64(np.float64(img[y0, x0] * dx1) * dy1)
  b = np.float64(np.float64(img[y0, x1] * dx0) * dy1)
  c = np.float64(np.float64(img[y1, x0] * dx1) * dy0)
  d = np.float64(np.float64(img[y1, x1] * dx0) * dy0)
  return np.float64(np.float64(np.float64(a + b) + c) + d)


@numba.njit(cache=True, nogil=True)
def _kernel64(edge, ori, r, s, m):
  h, w = edge.shape
  out = np.zeros((h, w), edge.dtype)
  for y in range(h):
    for x in range(w):
      e = edge[y, x]
      out[y, x] = e
      if e == 0:
        continue
      e = np.float64(e * m)
      co = np.float64(np.cos(ori[y, x]))
      so = np.float64(np.sin(ori[y, x]))
      for d in range(-r, r + 1):
        if d == 0:
          continue
        e0 = _interp64(
          edge,
          h,
          w,
          np.float64(np.float64(x) + np.float64(np.float64(d) * co)),
          np.float64(np.float64(y) + np.float64(np.float64(d) * so)),
        )
        if e < e0:
          out[y, x] = 0
          break
  if s > w // 2:
    s = w // 2
  if s > h // 2:
    s = h // 2
  for x in range(s):
    f = np.float64(np.float64(x) / np.float64(s))
    for y in range(h):
      out[y, x] = np.float64(out[y, x] * f)
      out[y, w - 1 - x] = np.float64(out[y, w - 1 - x] * f)
  for y in range(s):
    f = np.float64(np.float64(y) / np.float64(s))
    for x in range(w):
      out[y, x] = np.float64(out[y, x] * f)
      out[h - 1 - y, x] = np.float64(out[h - 1 - y, x] * f)
  return out


def edges_nms(edge, ori, r=1, s=5, m=1.01, dtype=np.float32):
  """`edgesNmsMex(E, O, r, s, m)`: suppress non-maxima across the edge.

  A pixel is zeroed when `E * m < E(bilinear)` at offsets d = -r..r (d != 0)
  along (cos O, sin O), samples read from the input map; then the s-pixel
  border frame is ramped linearly (outermost row/column becomes 0).

  Args:
    edge: [H, W] edge strengths (>= 0).
    ori: [H, W] orientation in radians.
    r: suppression radius in pixels (1 for doobscripts, 2 for crispness).
    s: border ramp width in pixels.
    m: multiplier; in float32 mode it is rounded to single as the MEX does.
    dtype: np.float32 (MATLAB MEX) or np.float64 (pyEdgeEval's port, which
      also rounds m to single).

  Returns:
    [H, W] array of `dtype`.
  """
  edge = np.ascontiguousarray(edge, dtype)
  ori = np.ascontiguousarray(ori, dtype)
  if edge.shape != ori.shape or edge.ndim != 2:
    raise ValueError(f"edge {edge.shape} and ori {ori.shape} must be equal 2-D")
  m32 = np.float32(m)
  if dtype == np.float32:
    return _kernel32(edge, ori, int(r), int(s), m32)
  if dtype == np.float64:
    return _kernel64(edge, ori, int(r), int(s), np.float64(m32))
  raise ValueError(f"dtype must be float32 or float64, got {dtype}")


def edge_nms(edge, dtype=np.float32):
  """doobscripts `edge_nms(E, 0)`: values <= 0 set to 0, then NMS r=1, s=5.

  Args:
    edge: [H, W] soft boundary map, nominally in [0, 1].
    dtype: np.float32 (default, MATLAB single) or np.float64.

  Returns:
    [H, W] thinned map of `dtype`; values in a 5-pixel border frame are
    attenuated linearly.
  """
  e = np.asarray(edge, dtype).copy()
  e[~(e > 0)] = 0  # also maps NaN to 0
  return edges_nms(e, nms_orientation(e, dtype), r=1, s=5, m=1.01, dtype=dtype)


def crispness(edge, dtype=np.float32):
  """Crispness of one map (Ye et al. 2023): sum NMS_{r=2}(E) / sum E.

  Args:
    edge: [H, W] soft map in [0, 1] (already in edge-is-bright convention).
    dtype: computation precision (float32 like the MATLAB script).

  Returns:
    float; NaN when the map has no positive mass.
  """
  e = np.asarray(edge, dtype)
  total = float(e.astype(np.float64).sum())
  if total <= 0:
    return float("nan")
  thin = edges_nms(e, nms_orientation(e, dtype), r=2, s=5, m=1.01, dtype=dtype)
  return float(thin.astype(np.float64).sum()) / total
