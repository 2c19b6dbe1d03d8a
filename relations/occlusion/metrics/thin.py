"""`bwmorph(B, 'thin', inf)` for the SEval protocol.

MATLAB's thinning is the two-subiteration algorithm of Lam, Lee and Suen
(1992), applied in parallel over the image: a foreground pixel p with
neighbours x1..x8 (east, then counter-clockwise: E, NE, N, NW, W, SW, S, SE)
is deleted when
  G1: the crossing number X_H(p) = 1,
  G2: 2 <= min(n1(p), n2(p)) <= 3, and
  G3 (odd subiterations): (x2 | x3 | ~x8) & x1 == 0, or
  G3' (even subiterations): (x6 | x7 | ~x4) & x5 == 0.
The subiterations alternate until one of them deletes nothing.  Pixels outside the image
count as background.
"""

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder


def _luts():
  """Deletion tables for the two subiterations, indexed by 8-bit codes."""
  lut1 = np.zeros(256, np.bool_)
  lut2 = np.zeros(256, np.bool_)
  for code in range(256):
    x = [(code >> i) & 1 for i in range(8)]  # x[0] = x1 ... x[7] = x8

    def nb(i, x=x):  # 1-based, cyclic
      return x[(i - 1) % 8]

    xh = sum(1 for i in range(1, 5) if nb(2 * i - 1) == 0 and (nb(2 * i) or nb(2 * i + 1)))
    n1 = sum(1 for k in range(1, 5) if nb(2 * k - 1) or nb(2 * k))
    n2 = sum(1 for k in range(1, 5) if nb(2 * k) or nb(2 * k + 1))
    g12 = xh == 1 and 2 <= min(n1, n2) <= 3
    g3 = ((nb(2) or nb(3) or not nb(8)) and nb(1)) == 0
    g3p = ((nb(6) or nb(7) or not nb(4)) and nb(5)) == 0
    lut1[code] = g12 and g3
    lut2[code] = g12 and g3p
  return lut1, lut2


_LUT1, _LUT2 = _luts()
# (dy, dx) of x1..x8.
_DY = np.array([0, -1, -1, -1, 0, 1, 1, 1], np.int64)
_DX = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)


@numba.njit(cache=True, nogil=True)
def _thin(img, lut1, lut2, ddy, ddx):
  h, w = img.shape
  cur = img.copy()
  dele = np.empty(h * w, np.int64)
  # The loop stops as soon as one subiteration deletes nothing, even if the
  # other one would (pyEdgeEval's `binary_thin`, the project's reference for
  # `bwmorph`, terminates this way).
  while True:
    for sub in range(2):
      lut = lut1 if sub == 0 else lut2
      nd = 0
      for y in range(h):
        for x in range(w):
          if not cur[y, x]:
            continue
          code = 0
          for i in range(8):
            yy = y + ddy[i]
            xx = x + ddx[i]
            if 0 <= yy < h and 0 <= xx < w and cur[yy, xx]:
              code |= 1 << i
          if lut[code]:
            dele[nd] = y * w + x
            nd += 1
      if nd == 0:
        return cur
      # Parallel update: all deletions decided on the same input.
      for i in range(nd):
        cur[dele[i] // w, dele[i] % w] = False


def thin(mask):
  """Thins a binary map to 1-pixel-wide curves (`bwmorph(.., 'thin', inf)`).

  Args:
    mask: bool [H, W].

  Returns:
    bool [H, W].
  """
  return _thin(np.ascontiguousarray(mask, np.bool_), _LUT1, _LUT2, _DY, _DX)
