"""Reading and writing the project's RealOOB on-disk layout.

The layout under a dataset root::

  images/<id>.{png,jpg}
  boundaries/<id>.png    uint8 [H, W]; 255 = occlusion-boundary pixel, 0 = not
  orientation/<id>.png   uint16 [H, W]; theta = v / 65535 * 2*pi - pi (radians,
                         left-hand rule: occluder on the left when walking along
                         theta; image frame, x right, y down)
  valid/<id>.png         uint8 [H, W]; 255 = valid orientation (B_valid)
  depth/<id>.png         optional, uint16 [H, W] millimetres, 0 = missing
  splits/<split>.txt     one image id per line
  sources.txt            optional; "<id> <source>" per line (DIODE, EntitySeg,
                         PIOD, LF4D, ...): per-source metrics and the stratified
                         split (`relations.occlusion.data.split`)

Predictions under a prediction root::

  boundaries/<id>.png    uint16 [H, W]; boundary probability = v / 65535
  orientation/<id>.png   uint16 [H, W]; same angle encoding as the GT

Every writer encodes into memory first and then writes a temporary file in
the target directory that is renamed over the final name, so a reader never
sees a half-written PNG.  Every reader raises `RealOOBFormatError` naming the
file and the field when the file is missing, unreadable, has the wrong dtype
or rank, or holds values outside the field's code book.
"""

import os

import cv2
import numpy as np

from relations import io_util

# Quantisation step of the orientation code: 2*pi / 65535 ~= 9.59e-5 rad.
ORIENTATION_STEP = 2.0 * np.pi / 65535.0
PROB_MAX = 65535

BOUNDARIES = "boundaries"
ORIENTATION = "orientation"
VALID = "valid"
DEPTH = "depth"
IMAGES = "images"
SPLITS = "splits"


class RealOOBFormatError(ValueError):
  """A file of the RealOOB layout is missing or violates its format."""


# ----------------------------------------------------------------------------
# Value codecs (pure numpy, no I/O).
# ----------------------------------------------------------------------------


def encode_orientation(theta):
  """Encodes angles (radians) as uint16 codes.

  The angle is first wrapped to [-pi, pi) (mod 2*pi), then
  v = rint((theta + pi) / (2*pi) * 65535) with numpy's round-half-to-even.
  The round-trip error is at most ORIENTATION_STEP / 2 (~4.8e-5 rad) modulo
  2*pi; an angle just below pi may encode as 65535, which decodes to +pi
  (the same direction as -pi).

  Args:
    theta: float array [H, W] (any shape), radians; must be finite.

  Returns:
    uint16 array of the same shape.
  """
  theta = np.asarray(theta, dtype=np.float64)
  if not np.all(np.isfinite(theta)):
    raise ValueError("encode_orientation: theta contains NaN or inf")
  t = np.mod(theta + np.pi, 2.0 * np.pi)  # [0, 2*pi)
  v = np.rint(t / (2.0 * np.pi) * 65535.0)
  return np.clip(v, 0, 65535).astype(np.uint16)


def decode_orientation(v):
  """Decodes uint16 orientation codes: theta = v / 65535 * 2*pi - pi.

  Args:
    v: uint16 array (any shape).

  Returns:
    float32 array of the same shape, radians in [-pi, pi].
  """
  v = np.asarray(v)
  return (v.astype(np.float64) / 65535.0 * 2.0 * np.pi - np.pi).astype(np.float32)


def encode_probability(prob):
  """Encodes probabilities in [0, 1] as uint16: v = rint(clip(p) * 65535).

  Values are clipped to [0, 1] first (round-half-to-even), so the decoded
  value is within 0.5 / 65535 of the clipped input.

  Args:
    prob: float array [H, W], nominally in [0, 1]; NaN is an error.

  Returns:
    uint16 array of the same shape.
  """
  prob = np.asarray(prob, dtype=np.float64)
  if np.any(np.isnan(prob)):
    raise ValueError("encode_probability: prob contains NaN")
  return np.rint(np.clip(prob, 0.0, 1.0) * 65535.0).astype(np.uint16)


def decode_probability(v):
  """Decodes uint16 probability codes: p = v / 65535 (float32 in [0, 1])."""
  return (np.asarray(v).astype(np.float64) / 65535.0).astype(np.float32)


# ----------------------------------------------------------------------------
# Low-level PNG I/O.
# ----------------------------------------------------------------------------


def _read_png(path, dtype, field):
  """Reads a single-channel PNG of the given dtype, or raises naming it."""
  if not os.path.isfile(path):
    raise RealOOBFormatError(f"{path}: {field} file is missing")
  data = np.fromfile(path, dtype=np.uint8)
  img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
  if img is None:
    raise RealOOBFormatError(f"{path}: {field} is not a readable PNG")
  if img.ndim != 2:
    raise RealOOBFormatError(f"{path}: {field} must be single-channel, got shape {img.shape}")
  if img.dtype != dtype:
    raise RealOOBFormatError(f"{path}: {field} must be {np.dtype(dtype).name}, got {img.dtype}")
  return img


def _write_png(path, array):
  """Writes a 2-D uint8/uint16 array as PNG atomically (temp + rename)."""
  array = np.ascontiguousarray(array)
  if array.ndim != 2 or array.dtype not in (np.uint8, np.uint16):
    raise ValueError(f"{path}: expected a 2-D uint8/uint16 array, got {array.dtype} {array.shape}")
  ok, buf = cv2.imencode(".png", array)
  if not ok:
    raise OSError(f"{path}: PNG encoding failed")
  io_util.write_bytes_atomic(path, buf.tobytes())


def _read_binary_mask(path, field):
  img = _read_png(path, np.uint8, field)
  bad = (img != 0) & (img != 255)
  if bad.any():
    y, x = np.argwhere(bad)[0]
    raise RealOOBFormatError(
      f"{path}: {field} must hold only 0 and 255, found {int(img[y, x])} at (y={y}, x={x})"
    )
  return img == 255


def _write_binary_mask(path, mask):
  mask = np.asarray(mask)
  if mask.ndim != 2:
    raise ValueError(f"{path}: mask must be 2-D, got shape {mask.shape}")
  _write_png(path, np.where(mask.astype(bool), 255, 0).astype(np.uint8))


# ----------------------------------------------------------------------------
# Per-field readers and writers (take file paths).
# ----------------------------------------------------------------------------


def read_boundaries(path):
  """Reads a GT boundary mask: bool [H, W], True = OB pixel (PNG value 255)."""
  return _read_binary_mask(path, "boundaries")


def write_boundaries(path, mask):
  """Writes a GT boundary mask (bool/0-1 [H, W]) as uint8 PNG 0/255."""
  _write_binary_mask(path, mask)


def read_valid(path):
  """Reads the valid-orientation mask: bool [H, W] (PNG value 255)."""
  return _read_binary_mask(path, "valid")


def write_valid(path, mask):
  """Writes a valid-orientation mask (bool [H, W]) as uint8 PNG 0/255."""
  _write_binary_mask(path, mask)


def read_orientation(path):
  """Reads an orientation map: float32 [H, W] radians in [-pi, pi]."""
  return decode_orientation(_read_png(path, np.uint16, "orientation"))


def write_orientation(path, theta):
  """Writes an orientation map (radians [H, W]) as uint16 PNG codes."""
  _write_png(path, encode_orientation(theta))


def read_depth(path):
  """Reads a depth map: float32 [H, W] in metres, 0.0 = missing.

  The file stores uint16 millimetres with 0 = missing.
  """
  mm = _read_png(path, np.uint16, "depth")
  return mm.astype(np.float32) / 1000.0


def write_depth(path, depth_m):
  """Writes depth (float metres [H, W]; <= 0 or NaN = missing) as uint16 mm.

  Values are rounded to the nearest millimetre; depths beyond 65.535 m are an
  error rather than silently clipped.
  """
  depth_m = np.asarray(depth_m, dtype=np.float64)
  missing = ~np.isfinite(depth_m) | (depth_m <= 0)
  mm = np.rint(np.where(missing, 0.0, depth_m) * 1000.0)
  if (mm > 65535).any():
    raise ValueError(f"{path}: depth above 65.535 m cannot be stored in uint16")
  # A positive depth below 0.5 mm would round to 0 (= missing); keep it at 1 mm.
  mm = np.where(~missing & (mm == 0), 1.0, mm)
  _write_png(path, mm.astype(np.uint16))


def read_probability(path):
  """Reads a predicted boundary probability map: float32 [H, W] in [0, 1]."""
  return decode_probability(_read_png(path, np.uint16, "boundaries"))


def write_probability(path, prob):
  """Writes a boundary probability map (float [H, W]) as uint16 PNG."""
  _write_png(path, encode_probability(prob))


# ----------------------------------------------------------------------------
# Directory-level helpers.
# ----------------------------------------------------------------------------


def field_path(root, field, image_id):
  """Returns `<root>/<field>/<image_id>.png`."""
  return os.path.join(root, field, f"{image_id}.png")


def image_path(root, image_id):
  """Returns the path of `images/<id>.png` or `.jpg` (whichever exists)."""
  for ext in (".png", ".jpg", ".jpeg"):
    p = os.path.join(root, IMAGES, image_id + ext)
    if os.path.isfile(p):
      return p
  raise RealOOBFormatError(f"{os.path.join(root, IMAGES, image_id)}.{{png,jpg}}: image is missing")


def read_split(root, split):
  """Reads `splits/<split>.txt`: list of ids (blank lines and '#' skipped)."""
  path = os.path.join(root, SPLITS, f"{split}.txt")
  if not os.path.isfile(path):
    raise RealOOBFormatError(f"{path}: split file is missing")
  ids = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line and not line.startswith("#"):
        ids.append(line)
  if len(set(ids)) != len(ids):
    raise RealOOBFormatError(f"{path}: split file lists an id twice")
  return ids


def write_split(root, split, ids):
  """Writes `splits/<split>.txt` atomically, one id per line."""
  path = os.path.join(root, SPLITS, f"{split}.txt")
  io_util.write_text_atomic(path, "".join(f"{i}\n" for i in ids))


SOURCES = "sources.txt"


def read_sources(root):
  """Reads the optional `sources.txt`: {id: source}, or None when absent.

  Raises:
    RealOOBFormatError: naming the file and line of a malformed or repeated entry.
  """
  path = os.path.join(root, SOURCES)
  if not os.path.isfile(path):
    return None
  out = {}
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      line = line.strip()
      if not line or line.startswith("#"):
        continue
      parts = line.split()
      if len(parts) != 2:
        raise RealOOBFormatError(f"{path}: line {n}: expected '<id> <source>', got {line!r}")
      if parts[0] in out:
        raise RealOOBFormatError(f"{path}: line {n}: id {parts[0]!r} listed twice")
      out[parts[0]] = parts[1]
  return out


def write_sources(root, sources):
  """Writes `sources.txt` atomically from {id: source} (ids sorted)."""
  for i, s in sources.items():
    if not s or any(c.isspace() for c in s) or any(c.isspace() for c in i):
      raise ValueError(f"id {i!r} / source {s!r}: no blanks allowed")
  text = "".join(f"{i} {sources[i]}\n" for i in sorted(sources))
  io_util.write_text_atomic(os.path.join(root, SOURCES), text)


def list_ids(root, field=BOUNDARIES):
  """Lists ids present as `<root>/<field>/*.png`, sorted (temp files skipped)."""
  directory = os.path.join(root, field)
  if not os.path.isdir(directory):
    raise RealOOBFormatError(f"{directory}: directory is missing")
  return sorted(
    name[:-4]
    for name in os.listdir(directory)
    if name.endswith(".png") and not name.startswith(".tmp_")
  )


def read_gt(root, image_id, with_depth=False):
  """Reads one GT sample of the RealOOB layout.

  Args:
    root: dataset root.
    image_id: the id (file stem).
    with_depth: also read `depth/<id>.png` (error if missing).

  Returns:
    dict with "boundaries" bool [H, W], "orientation" float32 [H, W] radians,
    "valid" bool [H, W] and, if requested, "depth" float32 [H, W] metres
    (0 = missing).

  Raises:
    RealOOBFormatError: a file is missing, malformed, or the shapes disagree,
      or valid pixels lie outside the boundary mask.
  """
  out = {
    "boundaries": read_boundaries(field_path(root, BOUNDARIES, image_id)),
    "orientation": read_orientation(field_path(root, ORIENTATION, image_id)),
    "valid": read_valid(field_path(root, VALID, image_id)),
  }
  if with_depth:
    out["depth"] = read_depth(field_path(root, DEPTH, image_id))
  shape = out["boundaries"].shape
  for k, v in out.items():
    if v.shape != shape:
      raise RealOOBFormatError(
        f"{field_path(root, k, image_id)}: {k} has shape {v.shape}, boundaries has {shape}"
      )
  if (out["valid"] & ~out["boundaries"]).any():
    raise RealOOBFormatError(
      f"{field_path(root, VALID, image_id)}: valid pixels outside the boundary mask"
    )
  return out


def write_gt(root, image_id, boundaries, orientation, valid, depth_m=None):
  """Writes one GT sample (arrays [H, W]; see the read functions for units)."""
  write_boundaries(field_path(root, BOUNDARIES, image_id), boundaries)
  write_orientation(field_path(root, ORIENTATION, image_id), orientation)
  write_valid(field_path(root, VALID, image_id), valid)
  if depth_m is not None:
    write_depth(field_path(root, DEPTH, image_id), depth_m)


def read_prediction(root, image_id, with_orientation=True):
  """Reads one prediction.

  Returns:
    dict with "boundaries" float32 [H, W] probability in [0, 1] and, if
    `with_orientation`, "orientation" float32 [H, W] radians.
  """
  out = {"boundaries": read_probability(field_path(root, BOUNDARIES, image_id))}
  if with_orientation:
    path = field_path(root, ORIENTATION, image_id)
    out["orientation"] = read_orientation(path)
    if out["orientation"].shape != out["boundaries"].shape:
      raise RealOOBFormatError(
        f"{path}: orientation has shape {out['orientation'].shape}, "
        f"boundaries has {out['boundaries'].shape}"
      )
  return out


def write_prediction(root, image_id, prob, orientation=None):
  """Writes one prediction: prob float [H, W] in [0, 1], orientation radians."""
  write_probability(field_path(root, BOUNDARIES, image_id), prob)
  if orientation is not None:
    write_orientation(field_path(root, ORIENTATION, image_id), orientation)
