"""Input pipeline ops for oriented occlusion boundaries (numpy, per example).

A *sample* is a dict of arrays for one image and one annotator:

  image        float32 [H, W, 3] in [-1, 1]
  boundary     float32 [H, W]  1 on OB pixels
  orientation  float32 [H, W]  radians in (-pi, pi] (internal convention:
                               left-hand rule, x right / y down)
  valid        float32 [H, W]  1 where the orientation supervises
  mask         float32 [H, W]  1 on real pixels, 0 on padding

Geometric ops move the label pixels and transform the angle with them:
a left-right flip maps theta -> -theta, an up-down flip theta -> pi - theta,
`np.rot90(., k)` (counter-clockwise on screen) theta -> theta - k*pi/2 (as
DOOBNet's augmentation), scaling keeps theta.  Every op is deterministic given
its arguments / rng.
"""

import cv2
import numpy as np

from relations.occlusion.data import formats as occlusion_formats

LABEL_KEYS = ("boundary", "orientation", "valid", "mask")


wrap_angle = occlusion_formats.to_internal_angle


# uint8 -> float32 in [-1, 1], as a lookup table (the same values as the arithmetic).
_TO_FLOAT = np.arange(256, dtype=np.uint8).astype(np.float32) / 127.5 - 1.0


def decode(example, annotator=0):
  """Builder example (see occlusion_boundaries) -> sample.

  Args:
    example: dict with "image" uint8 [H, W, 3], "boundaries"/"valid" bool
      [A, H, W], "orientation" float32 [A, H, W] (or the sparse "ob" pixels
      of `relations.occlusion.task.TrainSource`).
    annotator: which of the A annotations to use.

  Returns:
    A sample dict (see module docstring).
  """
  if "boundaries" not in example and "ob" in example:  # sparse OB pixels
    example = {
      "id": example.get("id"),
      "image": example["image"],
      **dense_labels(example["ob"], annotator),
    }
    annotator = 0
  img = np.asarray(example["image"])
  if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
    raise ValueError(
      f"example {example.get('id')!r}: image must be uint8 [H, W, 3], got {img.dtype} {img.shape}"
    )
  b = np.asarray(example["boundaries"])[annotator]
  return {
    "image": cv2.LUT(img, _TO_FLOAT),  # = img.astype(float32) / 127.5 - 1, ~15x faster
    "boundary": b.astype(np.float32),
    "orientation": np.where(b, np.asarray(example["orientation"])[annotator], 0).astype(np.float32),
    "valid": np.asarray(example["valid"])[annotator].astype(np.float32),
    "mask": np.ones(b.shape, np.float32),
  }


def dense_labels(ob, annotator):
  """The builder's sparse `ob` pixels -> [1, H, W] boundaries / orientation / valid of one annotator."""
  h, w = int(ob["height"]), int(ob["width"])
  mine = np.asarray(ob["annotator"]) == annotator
  idx = np.asarray(ob["index"])[mine]
  out = {
    "boundaries": np.zeros(h * w, bool),
    "orientation": np.zeros(h * w, np.float32),
    "valid": np.zeros(h * w, bool),
  }
  out["boundaries"][idx] = True
  out["orientation"][idx] = np.asarray(ob["orientation"])[mine]
  out["valid"][idx] = np.asarray(ob["valid"])[mine]
  return {k: v.reshape(1, h, w) for k, v in out.items()}


def _fix_orientation(s, fn):
  """Maps the angles of OB pixels through `fn` (wrapped); 0 elsewhere.

  Only the OB pixels (a few % of a crop) are transformed: the same values as
  wrapping the whole map and masking it.
  """
  out = dict(s)
  on = s["boundary"] > 0
  theta = np.zeros(on.shape, np.float32)
  theta[on] = wrap_angle(fn(s["orientation"][on]))
  out["orientation"] = theta
  return out


def flip_lr(s):
  """Left-right mirror; theta -> -theta."""
  out = {k: np.ascontiguousarray(v[:, ::-1]) for k, v in s.items()}
  return _fix_orientation(out, lambda t: -t)


def flip_ud(s):
  """Up-down mirror; theta -> pi - theta."""
  out = {k: np.ascontiguousarray(v[::-1]) for k, v in s.items()}
  return _fix_orientation(out, lambda t: np.pi - t)


def rot90(s, k):
  """`np.rot90(., k)` (counter-clockwise on screen); theta -> theta - k*pi/2."""
  k = int(k) % 4
  out = {key: np.ascontiguousarray(np.rot90(v, k)) for key, v in s.items()}
  return _fix_orientation(out, lambda t: t - k * np.pi / 2)


def crop(s, y0, x0, h, w):
  """Crops [y0:y0+h, x0:x0+w]; pads with mask 0 where the crop leaves the
  image (image 0, labels 0). A crop inside the image is a view."""
  H, W = s["mask"].shape
  if y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W:
    return {k: v[y0 : y0 + h, x0 : x0 + w] for k, v in s.items()}
  out = {}
  for k, v in s.items():
    pad = np.zeros((h, w) + v.shape[2:], v.dtype)
    ys, xs = max(y0, 0), max(x0, 0)
    ye, xe = min(y0 + h, H), min(x0 + w, W)
    if ye > ys and xe > xs:
      pad[ys - y0 : ye - y0, xs - x0 : xe - x0] = v[ys:ye, xs:xe]
    out[k] = pad
  return out


def random_crop(s, rng, h, w):
  """Uniform random crop of size (h, w); pads (mask 0) if the image is
  smaller."""
  H, W = s["mask"].shape
  y0 = int(rng.integers(0, H - h + 1)) if H >= h else 0
  x0 = int(rng.integers(0, W - w + 1)) if W >= w else 0
  return crop(s, y0, x0, h, w)


def scaled_size(hw, factor):
  """(h, w) of an (H, W) frame rescaled by `factor` (as `scale` rounds it)."""
  return max(1, int(round(hw[0] * factor))), max(1, int(round(hw[1] * factor)))


def scale(s, factor):
  """Isotropic rescale by `factor`; labels stay single-pixel and connected.

  The image is resized with area (down) or bilinear (up) interpolation.  OB
  pixels are forward-mapped (pixel centres) and every pair of 8-connected OB
  pixels is joined by sampling the mapped segment, so upscaled boundaries have
  no gaps; each new pixel takes the orientation / validity of its source.
  """
  H, W = s["mask"].shape
  h, w = scaled_size((H, W), factor)
  if (h, w) == (H, W):
    return dict(s)
  return resize_sample(s, h, w)


def resize_sample(s, h, w):
  """Rescales a sample to exactly (h, w) pixels; see `scale`."""
  H, W = s["mask"].shape
  fy, fx = h / H, w / W
  interp = cv2.INTER_AREA if fy * fx < 1 else cv2.INTER_LINEAR
  out = {"image": cv2.resize(s["image"], (w, h), interpolation=interp)}
  out["mask"] = (cv2.resize(s["mask"], (w, h), interpolation=cv2.INTER_NEAREST) > 0).astype(
    np.float32
  )
  b = s["boundary"] > 0
  ys, xs = np.nonzero(b)
  src_y, src_x = [ys], [xs]
  dst_y, dst_x = [(ys + 0.5) * fy - 0.5], [(xs + 0.5) * fx - 0.5]
  n = int(np.ceil(max(fy, fx))) + 1
  for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
    y2, x2 = ys + dy, xs + dx
    ok = (y2 < H) & (x2 >= 0) & (x2 < W)
    ok[ok] = b[y2[ok], x2[ok]]
    for t in np.linspace(0, 1, n + 1)[1:-1]:
      src_y.append(ys[ok])
      src_x.append(xs[ok])
      dst_y.append((ys[ok] + t * dy + 0.5) * fy - 0.5)
      dst_x.append((xs[ok] + t * dx + 0.5) * fx - 0.5)
  sy, sx = np.concatenate(src_y), np.concatenate(src_x)
  ty = np.clip(np.rint(np.concatenate(dst_y)).astype(int), 0, h - 1)
  tx = np.clip(np.rint(np.concatenate(dst_x)).astype(int), 0, w - 1)
  for k in ("boundary", "orientation", "valid"):
    a = np.zeros((h, w), np.float32)
    a[ty, tx] = s[k][sy, sx]
    out[k] = a
  out["boundary"] = (out["boundary"] > 0).astype(np.float32)
  return out


# Standard normal quantiles of 4096 equiprobable bins (their midpoints): a
# lookup of random 12-bit integers is Gaussian noise to within 1/4096 in
# probability (std 0.9998, |z| <= 3.67), at ~1/4 of the cost of
# `standard_normal`; the 16 KB table stays in the L1 cache.
_NORMAL_BITS = 12
_NORMAL_TABLE = None


def gaussian_noise(rng, shape):
  """float32 standard normal noise of `shape` from `rng` (inverse-CDF table, see above)."""
  global _NORMAL_TABLE
  n = 1 << _NORMAL_BITS
  if _NORMAL_TABLE is None:
    from scipy.special import ndtri  # pylint: disable=g-import-not-at-top

    _NORMAL_TABLE = ndtri((np.arange(n) + 0.5) / n).astype(np.float32)
  u = rng.integers(0, n, int(np.prod(shape)), dtype=np.uint16)
  return np.take(_NORMAL_TABLE, u).reshape(shape)


def photometric(s, rng, strength=1.0):
  """Brightness, contrast, per-channel gain, gamma and noise jitter.

  On x = (image + 1) / 2 in [0, 1]: per-channel gain g, contrast c about the
  mean m of the gained image, brightness b, clip to [0, 1], gamma, additive
  Gaussian noise (std 0.01), clip; i.e.
  clip(clip((x g - m) c + m + b, 0, 1) ** gamma + noise, 0, 1). Gain,
  contrast and brightness are one per-channel affine map of the image; float32
  throughout.
  """
  x = np.ascontiguousarray(s["image"], np.float32)
  gain = 1 + strength * rng.uniform(-0.1, 0.1, 3)
  contrast = 1 + strength * rng.uniform(-0.3, 0.3)
  bright = strength * rng.uniform(-0.1, 0.1)
  gamma = np.exp(strength * rng.uniform(-0.25, 0.25))
  # x = (image + 1) / 2: mean of the gained image, then image -> (x g - m) c + m + b.
  m = float(np.mean((np.asarray(cv2.mean(x)[:3]) + 1) / 2 * gain))
  a = gain * contrast / 2
  affine = np.concatenate([np.diag(a), (a - m * contrast + m + bright)[:, None]], 1)
  img = cv2.transform(x, affine.astype(np.float32)).reshape(x.shape)
  np.clip(img, 0, 1, out=img)
  with np.errstate(divide="ignore"):  # log(0) = -inf -> 0 ** gamma = 0
    np.log(img, out=img)
    img *= np.float32(gamma)
    np.exp(img, out=img)
  noise = gaussian_noise(rng, img.shape)
  noise *= np.float32(strength * 0.01)
  img += noise
  np.clip(img, 0, 1, out=img)
  img *= 2
  img -= 1
  out = dict(s)
  out["image"] = img
  return out


def geometric_variant(s, index, scales=(1.0, 0.75)):
  """The `index`-th (0..8*len(scales)-1) offline geometric augmentation.

  16x = 4 rotations x 2 (no flip / left-right flip) x 2 scales.  RealOOB's
  "16x offline geometric augmentation" is not specified further; this follows
  DOOBNet's rotation x flip recipe and adds one down-scale (inferred).
  """
  rot, flip, sc = index % 4, (index // 4) % 2, index // 8
  if sc >= len(scales):
    raise ValueError(f"variant {index} out of range for {len(scales)} scales")
  out = scale(s, scales[sc])
  out = rot90(out, rot)
  return flip_lr(out) if flip else out


def pool_summary(num_positive, num_hard_negative, num_variants=16):
  """The offline-augmented training pool: (size, hard-negative share, text).

  RealOOB (section 4.1): 390 training images x 16 + 248 hard negatives =
  6,488 samples; the hard negatives are not augmented (3.8 %).
  """
  pool = num_positive * num_variants + num_hard_negative
  share = num_hard_negative / pool if pool else 0.0
  text = (
    f"training pool: {num_positive} images x {num_variants} + {num_hard_negative} hard "
    f"negatives = {pool:,} samples ({100 * share:.1f} % hard negatives)"
  )
  return pool, share, text


class ExpandedSource:
  """Random-access source with the 16x geometric augmentation applied offline.

  As in RealOOB's training pool, only images with OBs are augmented: each
  positive base example yields `num_variants` items (variant 0 is the image
  itself), each hard negative (`hard_negative[i]` True) one unchanged item.
  Items are ordered by base example; deterministic, so it behaves as a
  materialised copy.
  """

  def __init__(self, base, num_variants=16, hard_negative=None):
    self.base, self.num_variants = base, num_variants
    flags = np.zeros(len(base), bool) if hard_negative is None else np.asarray(hard_negative, bool)
    if flags.shape != (len(base),):
      raise ValueError(f"hard_negative has {flags.shape} flags for {len(base)} examples")
    counts = np.where(flags, 1, num_variants)
    self._base_index = np.repeat(np.arange(len(base)), counts)
    starts = np.cumsum(counts) - counts
    self._variant = np.arange(len(self._base_index)) - np.repeat(starts, counts)
    self.num_hard_negative = int(flags.sum())
    self.num_positive = len(base) - self.num_hard_negative

  def summary(self):
    return pool_summary(self.num_positive, self.num_hard_negative, self.num_variants)

  def __len__(self):
    return len(self._base_index)

  def __getitem__(self, i):
    ex = self.base[int(self._base_index[i])]
    return {"sample": geometric_variant(decode(ex), int(self._variant[i])), "id": ex["id"]}


def train_sample(
  sample,
  rng,
  crop_size,
  scale_range=(1.0, 1.0),
  flips=True,
  rotations=True,
  photometric_strength=1.0,
):
  """Online training augmentation of one sample to a fixed (crop_size) shape.

  Random scale, 90-degree rotation, left-right flip, crop, photometric jitter,
  in that order of rng draws; computed crop first (`augment`): only the source
  window under the crop is rescaled / rotated / flipped.

  Args:
    sample: a decoded sample.
    rng: np.random.Generator.
    crop_size: (h, w) of the output.
    scale_range: uniform random scale range (1, 1 = no scaling).
    flips: random left-right flip.
    rotations: random 90-degree rotation (k in 0..3).
    photometric_strength: 0 disables photometric jitter.

  Returns:
    A sample of spatial size crop_size.
  """

  def window(y0, y1, x0, x1):
    return {k: v[y0:y1, x0:x1] for k, v in sample.items()}

  return augment(
    window,
    sample["mask"].shape,
    rng,
    crop_size,
    scale_range,
    flips,
    rotations,
    photometric_strength,
  )


def train_example(
  example,
  annotator,
  rng,
  crop_size,
  scale_range=(1.0, 1.0),
  flips=True,
  rotations=True,
  photometric_strength=1.0,
):
  """`train_sample` of `decode(example, annotator)`, decoding only the crop's window.

  `example` holds dense [A, H, W] labels, or the builder's sparse `ob` pixels
  (`relations.occlusion.task.TrainSource`), which are scattered into the
  window only.

  Only the source window under the crop is converted to float, rescaled,
  rotated and flipped (a 768x1024 image with 320x320 crops: ~1/5 of the
  pixels at scale 1); the example's other fields (depth) are never touched.
  """
  if "ob" in example:
    ob = example["ob"]
    hw = (int(ob["height"]), int(ob["width"]))
    mine = np.asarray(ob["annotator"]) == annotator
    ys, xs = np.divmod(np.asarray(ob["index"])[mine], hw[1])
    theta = np.asarray(ob["orientation"])[mine]
    ok = np.asarray(ob["valid"])[mine]
  else:
    hw = np.asarray(example["boundaries"]).shape[1:]

  def window(y0, y1, x0, x1):
    win = {"image": np.asarray(example["image"])[y0:y1, x0:x1], "id": example.get("id")}
    if "ob" in example:  # sparse OB pixels -> dense maps of the window only
      inside = (ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)
      yy, xx = ys[inside] - y0, xs[inside] - x0
      shape = (1, y1 - y0, x1 - x0)
      win["boundaries"] = np.zeros(shape, bool)
      win["orientation"] = np.zeros(shape, np.float32)
      win["valid"] = np.zeros(shape, bool)
      win["boundaries"][0, yy, xx] = True
      win["orientation"][0, yy, xx] = theta[inside]
      win["valid"][0, yy, xx] = ok[inside]
    else:
      for k in ("boundaries", "orientation", "valid"):
        win[k] = np.asarray(example[k])[annotator : annotator + 1, y0:y1, x0:x1]
    return decode(win, 0)

  return augment(window, hw, rng, crop_size, scale_range, flips, rotations, photometric_strength)


def _rotated_rect(rect, k, h, w):
  """Rows/cols [r0, r1) x [c0, c1) of `np.rot90(a, k)` -> the same pixels' rect in a [h, w]."""
  r0, r1, c0, c1 = rect
  return {
    0: (r0, r1, c0, c1),
    1: (c0, c1, w - r1, w - r0),
    2: (h - r1, h - r0, w - c1, w - c0),
    3: (h - c1, h - c0, r0, r1),
  }[k]


def _rot_flip(s, k, flip):
  """`flip_lr?(rot90(s, k))` with one copy of each map (same values)."""
  if not k and not flip:
    return s
  out = {}
  for key, v in s.items():
    v = np.rot90(v, k) if k else v
    out[key] = np.ascontiguousarray(v[:, ::-1] if flip else v)
  on = out["boundary"] > 0
  theta = out["orientation"][on]
  if k:
    theta = wrap_angle(theta - k * np.pi / 2)
  if flip:
    theta = wrap_angle(-theta)
  out["orientation"] = np.zeros(on.shape, np.float32)
  out["orientation"][on] = theta
  return out


def augment(
  window,
  hw,
  rng,
  crop_size,
  scale_range=(1.0, 1.0),
  flips=True,
  rotations=True,
  photometric_strength=1.0,
):
  """Crop-first scale / rot90 / flip / crop / photometric of an (H, W) source.

  The random draws (and their order) are those of the whole-image recipe
  `photometric(random_crop(flip_lr?(rot90(scale(s, f), k)), ...))`; the crop
  is mapped back through the flip and rotation (exact pixel permutations) and
  the scale, so only its source window is read (`window(y0, y1, x0, x1)` ->
  float sample of that window, inside the image) and transformed. At scale 1
  the result equals the whole-image recipe bit for bit; with rescaling the
  window is resized on its own, which can shift the sampling grid by under
  half an output pixel.
  """
  H, W = hw
  lo, hi = scale_range
  factor = rng.uniform(lo, hi) if (hi > lo or lo != 1.0) else 1.0
  h2, w2 = scaled_size((H, W), factor)
  k = int(rng.integers(4)) if rotations else 0
  flip = bool(flips and rng.uniform() < 0.5)
  hr, wr = (h2, w2) if k % 2 == 0 else (w2, h2)
  ch, cw = crop_size
  y0 = int(rng.integers(0, hr - ch + 1)) if hr >= ch else 0
  x0 = int(rng.integers(0, wr - cw + 1)) if wr >= cw else 0
  if flip:
    x0 = wr - x0 - cw
  sy0, sy1, sx0, sx1 = _rotated_rect((y0, y0 + ch, x0, x0 + cw), k, h2, w2)
  if (h2, w2) == (H, W):
    oy0, oy1, ox0, ox1 = max(sy0, 0), min(sy1, H), max(sx0, 0), min(sx1, W)
    s = crop(window(oy0, oy1, ox0, ox1), sy0 - oy0, sx0 - ox0, sy1 - sy0, sx1 - sx0)
  else:
    fy, fx = h2 / H, w2 / W
    # Source pixels whose (area / bilinear) footprint reaches the window.
    oy0 = max(int(np.floor((max(sy0, 0) + 0.5) / fy - 0.5)) - 2, 0)
    oy1 = min(int(np.ceil((min(sy1, h2) + 0.5) / fy - 0.5)) + 2, H)
    ox0 = max(int(np.floor((max(sx0, 0) + 0.5) / fx - 0.5)) - 2, 0)
    ox1 = min(int(np.ceil((min(sx1, w2) + 0.5) / fx - 0.5)) + 2, W)
    ty0, ty1 = int(round(oy0 * fy)), int(round(oy1 * fy))
    tx0, tx1 = int(round(ox0 * fx)), int(round(ox1 * fx))
    s = resize_sample(window(oy0, oy1, ox0, ox1), max(ty1 - ty0, 1), max(tx1 - tx0, 1))
    s = crop(s, sy0 - ty0, sx0 - tx0, sy1 - sy0, sx1 - sx0)
  s = _rot_flip(s, k, flip)
  if photometric_strength > 0:
    s = photometric(s, rng, photometric_strength)
  return s


def pad_to_multiple(image, multiple):
  """Pads [H, W, C] at the bottom/right (edge replication) to multiples.

  Returns:
    (padded [H', W', C], (H, W)) where H', W' are multiples of `multiple`.
    Replicated edges avoid a fake step that a zero pad would show the model.
  """
  h, w = image.shape[:2]
  ph, pw = -h % multiple, -w % multiple
  padded = np.pad(image, ((0, ph), (0, pw)) + ((0, 0),) * (image.ndim - 2), mode="edge")
  return padded, (h, w)


def crop_back(pred, hw):
  """Inverse of `pad_to_multiple` for a prediction [H', W', ...]."""
  return pred[: hw[0], : hw[1]]
