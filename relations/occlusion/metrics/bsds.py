"""The BSDS `correspondPixels` matcher (pyEdgeEval 0.2.8), for `matcher="bsds"`.

Published PIOD / BSDS-ownership / RealOOB numbers were matched by the BSDS
C++ matcher (Martin/Fowlkes CSA on a sparse random outlier graph).  It finds
slightly fewer pairs than the exact matching of `matching.py` (spec §2.2),
so numbers meant to sit next to published tables should use it.
pyEdgeEval ships that C++ unchanged; it is an optional extra (`bsds`) that is
an sdist compiled against the installed numpy, so it installs in two steps:

  pip install Cython==3.3.1 && pip install --no-build-isolation pyedgeeval==0.2.8

Randomness: the matcher draws its outlier arcs from one process-wide
generator (`Random::rand`), seeded from the clock when the library loads, so
results differ from run to run.  `reseed` sets that generator's seed (the
C++ `Random::reseed`, reached through ctypes), which makes a run
reproducible; seed 0 means "from the clock", as in BSDS.  The matcher holds
the GIL for each call, so threads never run it concurrently; `LOCK` keeps a
seeded image's calls together so that its random stream is its own.
"""

import ctypes
import sys
import threading

import numpy as np

INSTALL_HINT = (
  "matcher 'bsds' needs pyEdgeEval 0.2.8 (the BSDS C++ matcher), an sdist "
  "that must be built without isolation: pip install Cython==3.3.1 && pip "
  "install --no-build-isolation pyedgeeval==0.2.8  (the `bsds` extra; see "
  "relations/occlusion/README.md, 'Which matcher')"
)

# Serialises the matcher calls of one seeded image (see the module docstring).
LOCK = threading.Lock()
_MODULE = "pyEdgeEval._lib.correspond_pixels"
_reseed_fn = None


class MatcherUnavailableError(ImportError):
  """pyEdgeEval is not installed; the message says how to install it."""


def correspond_fn():
  """pyEdgeEval's `correspond_pixels`, or MatcherUnavailableError."""
  try:
    from pyEdgeEval._lib import correspond_pixels  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise MatcherUnavailableError(INSTALL_HINT) from None
  return correspond_pixels


def require():
  """Raises MatcherUnavailableError (one line) unless the matcher imports."""
  correspond_fn()


def reseed(seed):
  """Seeds the matcher's process-wide generator (0: from the clock).

  Args:
    seed: int in [0, 2^48); BSDS keeps the low 48 bits.
  """
  global _reseed_fn
  seed = int(seed)
  if not 0 <= seed < 1 << 48:
    raise ValueError(f"bsds seed must be in [0, 2^48), got {seed}")
  if _reseed_fn is None:
    correspond_fn()
    lib = ctypes.CDLL(sys.modules[_MODULE].__file__)
    fn = lib._ZN6Random6reseedEm  # Random::reseed(unsigned long)  pylint: disable=protected-access
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    fn.restype = None
    this = ctypes.addressof(ctypes.c_char.in_dll(lib, "_ZN6Random4randE"))
    _reseed_fn = lambda s: fn(this, s)
  _reseed_fn(seed)


def correspond(pred_mask, gt_mask, max_dist):
  """One `correspondPixels` call, returned as matched pixel pairs.

  Args:
    pred_mask: bool [H, W] binary prediction.
    gt_mask: bool [H, W] one annotation.
    max_dist: tolerance as a fraction of the image diagonal.

  Returns:
    (pred_yx, gt_yx): int64 [n, 2] each, row i a matched pair.
  """
  match1 = correspond_fn()(
    np.asarray(pred_mask, np.float64), np.asarray(gt_mask, np.float64), max_dist=max_dist
  )[0]
  h = match1.shape[0]
  p = np.argwhere(match1 > 0)
  # 1-based column-major (MATLAB) linear index of the matched GT pixel.
  v = match1[p[:, 0], p[:, 1]].astype(np.int64) - 1
  return p, np.stack([v % h, v // h], 1)
