"""Jitted float64 array kernels of the official VidVRD scorer.

Exactness (the numbers must equal `evaluation/common.py::viou` of
VidVRD-helper bit for bit, also on float boxes):

- Everything runs in float64 under `jax.enable_x64`: the official code does
  Python float (IEEE double) arithmetic; integer boxes stay exact in float64
  while sums are below 2**53 (checked by the caller).
- Python's `max(a, b)` / `min(a, b)` return the first argument unless the
  second compares strictly greater / smaller; `_pymax` / `_pymin` copy that
  (it differs from `jnp.maximum` only for NaN and signed zeros).
- Sums are NOT done here. XLA:CPU contracts `acc + w * h` into one fused
  multiply-add (verified on jax 0.10.2, `optimization_barrier` does not stop
  it) and may reassociate reductions, which changes the last bit on float
  boxes. The kernels therefore return per-frame areas (products only); the
  caller accumulates them strictly left to right with `np.bincount` (a plain
  sequential C loop), which is what the official `+=` loop does.
- The division `inter / (v1 + v2 - inter)` has no multiply, so it is exact
  IEEE here.

Shapes are padded by the caller to a few bucket sizes so the jit cache stays
small; padded entries are ignored.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np


def _pymax(a, b):
  """Python's max(a, b): b only if b > a."""
  return jnp.where(b > a, b, a)


def _pymin(a, b):
  """Python's min(a, b): b only if b < a."""
  return jnp.where(b < a, b, a)


@jax.jit
def _box_areas(boxes):
  x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
  # "(x2 - x1 + 1) * (y2 - y1 + 1)", evaluated left to right as in Python.
  return ((x2 - x1) + 1.0) * ((y2 - y1) + 1.0)


@jax.jit
def _pair_areas(store, idx_a, idx_b):
  a = store[idx_a]
  b = store[idx_b]
  left = _pymax(a[:, 0], b[:, 0])
  top = _pymax(a[:, 1], b[:, 1])
  right = _pymin(a[:, 2], b[:, 2])
  bottom = _pymin(a[:, 3], b[:, 3])
  w = _pymax(0.0, (right - left) + 1.0)
  h = _pymax(0.0, (bottom - top) + 1.0)
  return w * h


@jax.jit
def _viou_from_sums(inter, vol_a, vol_b, disjoint):
  denom = (vol_a + vol_b) - inter
  safe = jnp.where(denom == 0, 1.0, denom)
  return jnp.where(disjoint, 0.0, inter / safe), denom == 0


def _bucket(n, minimum=1024):
  """Smallest power of two >= max(n, minimum): few distinct jit shapes."""
  return max(minimum, 1 << max(0, int(n - 1).bit_length()))


def _pad(x, size, value=0):
  if len(x) == size:
    return x
  # Only the tail is filled: writing the whole padded buffer twice showed up
  # as a large share of the time on VidOR-sized inputs.
  out = np.empty((size,) + x.shape[1:], dtype=x.dtype)
  out[:len(x)] = x
  out[len(x):] = value
  return out


# Elements per kernel call: bounds the transient memory of one call.
_CHUNK = 1 << 21


def box_areas(boxes: np.ndarray) -> np.ndarray:
  """Official "+1" box areas.

  Args:
    boxes: [N, 4] float64 (x1, y1, x2, y2), inclusive pixel corners; inverted
      boxes are not clipped (the official code does not clip either).

  Returns:
    [N] float64, `(x2 - x1 + 1) * (y2 - y1 + 1)` rounded as Python does.
  """
  boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
  out = np.empty(len(boxes), np.float64)
  with jax.enable_x64(True):
    for s in range(0, len(boxes), _CHUNK):
      part = boxes[s:s + _CHUNK]
      size = _bucket(len(part))
      out[s:s + len(part)] = np.asarray(
          _box_areas(_pad(part, size)))[:len(part)]
  return out


def pair_intersection_areas(store: np.ndarray, idx_a: np.ndarray,
                            idx_b: np.ndarray) -> np.ndarray:
  """Per-frame intersection areas of box pairs, official "+1" convention.

  Args:
    store: [N, 4] float64 boxes.
    idx_a, idx_b: [E] int indices into `store`, the two boxes of each element.

  Returns:
    [E] float64, `max(0, R - L + 1) * max(0, B - T + 1)` with
    L = max(x1), T = max(y1), R = min(x2), B = min(y2) (Python max/min).
  """
  store = np.asarray(store, np.float64).reshape(-1, 4)
  if not len(store):
    store = np.zeros((1, 4))
  e = len(idx_a)
  out = np.empty(e, np.float64)
  with jax.enable_x64(True):
    dev_store = jnp.asarray(_pad(store, _bucket(len(store))))
    for s in range(0, e, _CHUNK):
      a = idx_a[s:s + _CHUNK]
      b = idx_b[s:s + _CHUNK]
      size = _bucket(len(a))
      res = _pair_areas(dev_store, _pad(a.astype(np.int64), size),
                        _pad(b.astype(np.int64), size))
      out[s:s + len(a)] = np.asarray(res)[:len(a)]
  return out


def sequential_segment_sums(values: np.ndarray, segment_ids: np.ndarray,
                            num_segments: int) -> np.ndarray:
  """Sums of `values` per segment, accumulated strictly in input order.

  `np.bincount` with weights runs `out[id[i]] += w[i]` for i = 0, 1, ...,
  i.e. exactly the official `v += area` loop when the elements of one
  segment appear in frame order. Starting from 0.0 instead of the int 0 of
  the official loop gives the same double.

  Args:
    values: [E] float64.
    segment_ids: [E] int in [0, num_segments).
    num_segments: number of segments.

  Returns:
    [num_segments] float64.
  """
  if not len(values):
    return np.zeros(num_segments, np.float64)
  return np.bincount(segment_ids, weights=values, minlength=num_segments)


def viou_from_sums(inter, vol_a, vol_b, disjoint):
  """vIoU = inter / (vol_a + vol_b - inter), 0 for disjoint durations.

  Args:
    inter, vol_a, vol_b: [K] float64 sequential sums (see above).
    disjoint: [K] bool, the durations do not overlap (official returns 0.).

  Returns:
    (viou [K] float64, zero_division [K] bool). Where `zero_division` is true
    and `disjoint` false the official code raises ZeroDivisionError.
  """
  k = len(inter)
  if not k:
    return np.zeros(0), np.zeros(0, bool)
  size = _bucket(k)
  with jax.enable_x64(True):
    v, z = _viou_from_sums(_pad(np.asarray(inter, np.float64), size),
                           _pad(np.asarray(vol_a, np.float64), size, 1.0),
                           _pad(np.asarray(vol_b, np.float64), size, 1.0),
                           _pad(np.asarray(disjoint, bool), size, True))
    return np.asarray(v)[:k], np.asarray(z)[:k] & ~np.asarray(disjoint, bool)


@functools.partial(jax.jit, static_argnames=())
def _greedy(ov, live0, crash, threshold):
  """Greedy matching over predictions (scan axis 1), batched over videos."""
  num_gt = ov.shape[2]
  gt_ids = jnp.arange(num_gt)

  def step(detected, xs):
    ov_p, same_p, crash_p = xs  # [V, G] each
    live = same_p & ~detected
    crash_hit = jnp.any(live & crash_p, axis=1)
    # Official rule: among live GT with ov >= threshold keep the first one
    # with the strictly largest ov; `argmax` returns the first maximum.
    valid = live & (ov_p >= threshold) & ~crash_p
    cand = jnp.where(valid, ov_p, -jnp.inf)
    k = jnp.argmax(cand, axis=1)
    ok = jnp.any(valid, axis=1)
    detected = detected | (ok[:, None] & (gt_ids[None, :] == k[:, None]))
    return detected, (ok, jnp.where(ok, k, -1), crash_hit)

  xs = (jnp.swapaxes(ov, 0, 1), jnp.swapaxes(live0, 0, 1),
        jnp.swapaxes(crash, 0, 1))
  detected0 = jnp.zeros((ov.shape[0], num_gt), bool)
  _, (ok, k, crash_hit) = jax.lax.scan(step, detected0, xs)
  return ok.T, k.T, crash_hit.T


def greedy_match(ov: np.ndarray, same: np.ndarray, crash: np.ndarray,
                 threshold: float):
  """The official greedy assignment, for a batch of videos.

  Predictions are processed in the given order (already score-sorted);
  each takes the not-yet-detected GT of the same triplet with the largest
  ov >= threshold, the first GT index winning ties; a GT is consumed once.

  Args:
    ov: [V, P, G] float64 min(sub vIoU, obj vIoU).
    same: [V, P, G] bool, the triplets are equal (padding: False).
    crash: [V, P, G] bool, evaluating this pair raises in the official code.
    threshold: vIoU threshold (0.5).

  Returns:
    matched [V, P] bool, gt_index [V, P] int (-1 if none), crash_hit [V, P]
    bool (the official code would evaluate a crashing pair at this step).
  """
  v, p, g = ov.shape
  if not (v and p and g):
    return (np.zeros((v, p), bool), np.full((v, p), -1, np.int64),
            np.zeros((v, p), bool))
  sv, sp, sg = _bucket(v, 8), _bucket(p, 8), _bucket(g, 8)
  def pad3(x, value):
    out = np.full((sv, sp, sg), value, x.dtype)
    out[:v, :p, :g] = x
    return out
  with jax.enable_x64(True):
    ok, k, hit = _greedy(pad3(ov.astype(np.float64), -np.inf),
                         pad3(same, False), pad3(crash, False),
                         np.float64(threshold))
    return (np.asarray(ok)[:v, :p], np.asarray(k)[:v, :p],
            np.asarray(hit)[:v, :p])
