"""Readers for other tools' occlusion predictions (`--pred-format`).

Every reader returns the evaluator's input for one image: "boundaries"
float32 [H, W] probability in [0, 1] and, with orientation, "orientation"
float32 [H, W] radians (any 2*pi offset; only circular differences are
scored).  Conventions, learned from each tool's public code:

* `ours`: the project's prediction layout (`realoob_io`):
  `boundaries/<id>.png` uint16 probability, `orientation/<id>.png` uint16
  angle code.
* `doob_mat`: doobscripts' input (DOOBNet, OFNet, MT-ORL's .mat export,
  P2ORM): `<id>.mat` (P2ORM: `<id>_lab_v_g.mat`) holding the struct
  `edge_ori` with fields `edge` (probability) and `ori` (radians), as
  `scipy.io.savemat(path, {"edge_ori": {"edge": e, "ori": o}})` writes it;
  or DOC's released MatLib layout, `doc_edge/<id>.mat` (`edgemap`) and
  `doc_ori/<id>.mat` (`occmap`).
* `mtorl_png`: MT-ORL / IOBE PNGs, read by their `Evaluate.m` as
  `edge = (255 - png) / 255` (boundary drawn black on white) from
  `<id>_boundary.png` or `<id>_ob.png`, and `ori = png * 2*pi / 255` from
  `<id>_orientation.png` or `<id>_oo.png` (8-bit grey).
* `p2orm_png`: P2ORM's result images (`results_vis/.../images/`):
  `<id>_lab_v_g.png` = uint8(prob * 255), `<id>_lab_v_g_ori.png` =
  uint8((ori / pi + 1) / 2 * 255), read back as `png / 255` and
  `png / 255 * 2*pi - pi` (its `save_res_matlab`); an `images/` subfolder
  is searched too.

doobscripts silently resize a prediction of another size to the GT
(`imresize`, bilinear); these readers return native sizes and the caller
reports a mismatch as an error (spec: predictions at native resolution).
"""

import os

import cv2
import numpy as np
import scipy.io

from relations.occlusion.data import realoob_io

PRED_FORMATS = ("ours", "doob_mat", "mtorl_png", "p2orm_png")

PredFormatError = realoob_io.RealOOBFormatError


def _first(paths):
  """The first existing path, else the first candidate (named in errors)."""
  for p in paths:
    if os.path.isfile(p):
      return p
  return paths[0]


def candidates(pred_dir, fmt, image_id):
  """Per role ("boundaries", "orientation"), the candidate paths in order."""
  j = lambda *p: os.path.join(pred_dir, *p)
  if fmt == "ours":
    return {
      "boundaries": [realoob_io.field_path(pred_dir, realoob_io.BOUNDARIES, image_id)],
      "orientation": [realoob_io.field_path(pred_dir, realoob_io.ORIENTATION, image_id)],
    }
  if fmt == "doob_mat":
    if os.path.isdir(j("doc_edge")):  # DOC's MatLib layout: two files
      return {
        "boundaries": [j("doc_edge", f"{image_id}.mat")],
        "orientation": [j("doc_ori", f"{image_id}.mat")],
      }
    one = [j(f"{image_id}.mat"), j(f"{image_id}_lab_v_g.mat")]
    return {"boundaries": one, "orientation": one}
  if fmt == "mtorl_png":
    return {
      "boundaries": [j(f"{image_id}_boundary.png"), j(f"{image_id}_ob.png")],
      "orientation": [j(f"{image_id}_orientation.png"), j(f"{image_id}_oo.png")],
    }
  if fmt == "p2orm_png":
    return {
      "boundaries": [j(f"{image_id}_lab_v_g.png"), j("images", f"{image_id}_lab_v_g.png")],
      "orientation": [
        j(f"{image_id}_lab_v_g_ori.png"),
        j("images", f"{image_id}_lab_v_g_ori.png"),
      ],
    }
  raise ValueError(f"pred_format must be one of {PRED_FORMATS}, got {fmt!r}")


def paths(pred_dir, fmt, image_id, with_orientation=True):
  """The files one image's prediction is read from, by role."""
  c = candidates(pred_dir, fmt, image_id)
  roles = ("boundaries", "orientation") if with_orientation else ("boundaries",)
  return {r: _first(c[r]) for r in roles}


def _read_gray8(path, field):
  """An 8-bit single-channel PNG (as MATLAB's imread of these files sees it)."""
  if not os.path.isfile(path):
    raise PredFormatError(f"{path}: {field} file is missing")
  data = np.fromfile(path, dtype=np.uint8)
  img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
  if img is None:
    raise PredFormatError(f"{path}: {field} is not a readable PNG")
  if img.ndim != 2 or img.dtype != np.uint8:
    raise PredFormatError(
      f"{path}: {field} must be an 8-bit single-channel PNG, got {img.dtype} {img.shape}"
    )
  return img


def _loadmat(path, field):
  if not os.path.isfile(path):
    raise PredFormatError(f"{path}: {field} file is missing")
  try:
    return scipy.io.loadmat(path, squeeze_me=True, struct_as_record=True)
  except Exception as e:  # scipy raises several types for corrupt files
    raise PredFormatError(f"{path}: not a readable .mat file ({e})") from e


def _matrix(value, path, field):
  a = np.asarray(value)
  if a.ndim != 2 or not np.issubdtype(a.dtype, np.number):
    raise PredFormatError(f"{path}: {field} must be a 2-D numeric matrix, got {a.dtype} {a.shape}")
  a = a.astype(np.float32)
  if not np.all(np.isfinite(a)):
    raise PredFormatError(f"{path}: {field} holds NaN or inf")
  return a


def _struct_field(m, var, name, path):
  if var not in m:
    raise PredFormatError(
      f"{path}: no variable {var!r} (has {', '.join(k for k in m if not k.startswith('__'))})"
    )
  s = m[var]
  if s.dtype.names is None or name not in s.dtype.names:
    raise PredFormatError(f"{path}: {var} has no field {name!r}")
  return s[name].item() if s.ndim == 0 else s[name].flat[0]


def _read_doob_mat(p, with_orientation):
  if os.path.basename(os.path.dirname(p["boundaries"])) == "doc_edge":
    out = {
      "boundaries": _matrix(
        _loadmat(p["boundaries"], "edgemap").get("edgemap"), p["boundaries"], "edgemap"
      )
    }
    if with_orientation:
      m = _loadmat(p["orientation"], "occmap")
      out["orientation"] = _matrix(m.get("occmap"), p["orientation"], "occmap")
    return out
  m = _loadmat(p["boundaries"], "edge_ori")
  path = p["boundaries"]
  out = {"boundaries": _matrix(_struct_field(m, "edge_ori", "edge", path), path, "edge_ori.edge")}
  if with_orientation:
    ori = _matrix(_struct_field(m, "edge_ori", "ori", path), path, "edge_ori.ori")
    out["orientation"] = ori
  return out


def read(pred_dir, fmt, image_id, with_orientation=True):
  """Reads one image's prediction in format `fmt`.

  Args:
    pred_dir: prediction root.
    fmt: one of PRED_FORMATS.
    image_id: the image id.
    with_orientation: also read the orientation.

  Returns:
    dict "boundaries" float32 [H, W] in [0, 1] (values outside are clipped,
    as `edge_nms` zeroes negatives and thresholds stop at 0.99) and, with
    orientation, "orientation" float32 [H, W] radians.

  Raises:
    PredFormatError naming the file and the field.
  """
  if fmt == "ours":
    return realoob_io.read_prediction(pred_dir, image_id, with_orientation)
  p = paths(pred_dir, fmt, image_id, with_orientation)
  if fmt == "doob_mat":
    out = _read_doob_mat(p, with_orientation)
  elif fmt == "mtorl_png":
    e = _read_gray8(p["boundaries"], "boundary")
    out = {"boundaries": ((255.0 - e) / 255.0).astype(np.float32)}
    if with_orientation:
      o = _read_gray8(p["orientation"], "orientation")
      out["orientation"] = (o * (2.0 * np.pi / 255.0)).astype(np.float32)
  elif fmt == "p2orm_png":
    e = _read_gray8(p["boundaries"], "boundary")
    out = {"boundaries": (e / 255.0).astype(np.float32)}
    if with_orientation:
      o = _read_gray8(p["orientation"], "orientation")
      out["orientation"] = (o / 255.0 * 2.0 * np.pi - np.pi).astype(np.float32)
  else:
    raise ValueError(f"pred_format must be one of {PRED_FORMATS}, got {fmt!r}")
  out["boundaries"] = np.clip(out["boundaries"], 0.0, 1.0)
  if with_orientation and out["orientation"].shape != out["boundaries"].shape:
    raise PredFormatError(
      f"{p['orientation']}: orientation has shape {out['orientation'].shape}, "
      f"boundaries ({p['boundaries']}) has {out['boundaries'].shape}"
    )
  return out


def _png_shape(path):
  """(H, W) from a PNG's IHDR chunk, without decoding; None if not a PNG."""
  with open(path, "rb") as f:
    head = f.read(24)
  if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
    return None
  return (int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big"))


def check(pred_dir, fmt, image_id, with_orientation, shape):
  """Problems with one image's prediction files, as "<id>: ..." strings.

  Missing files, unreadable files and a size other than `shape` (the GT's
  (H, W), or None when unknown) are reported; PNGs are checked from their
  header only, .mat files are read.
  """
  problems = []
  p = paths(pred_dir, fmt, image_id, with_orientation)
  for role, path in p.items():
    if not os.path.isfile(path):
      problems.append(f"{image_id}: missing {path} ({role})")
  if problems:
    return problems
  if fmt == "doob_mat":
    try:
      hw = read(pred_dir, fmt, image_id, with_orientation)["boundaries"].shape
    except PredFormatError as e:
      return [f"{image_id}: {e}"]
    found = {path: hw for path in set(p.values())}
  else:
    found = {}
    for role, path in p.items():
      hw = _png_shape(path)
      if hw is None:
        problems.append(f"{image_id}: {path} is not a PNG file")
      else:
        found[path] = hw
  sizes = set(found.values()) | ({tuple(shape)} if shape is not None else set())
  if len(sizes) > 1:
    problems.append(
      f"{image_id}: sizes differ (predictions must be at the GT's native resolution): "
      + ", ".join(f"{q} {h}x{w}" for q, (h, w) in found.items())
      + (f", GT {shape[0]}x{shape[1]}" if shape is not None else "")
    )
  return problems
