"""Readers (and dummy-data writers) for public oriented-OB annotation files.

Every reader returns the project's one internal convention:

* boundaries: bool [H, W], True on occlusion-boundary pixels;
* orientation: float32 [H, W] radians in (-pi, pi], left-hand rule (walking
  along theta, the occluder is on the left), image frame x right / y down;
  0 off the boundary;
* valid: bool [H, W], pixels whose orientation is usable (a subset of
  boundaries).

Formats:

* PIOD `Data/<id>.mat` with struct `bndinfo_pascal`: `imsize` [H W],
  `ne` (number of edge fragments), `edges.indices{i}` (1-based column-major
  MATLAB linear indices of fragment i) and `OrientMap` (H x W radians).  This
  is what DOOBNet's `GetEdgeGT.m` / `doobnet_mat2hdf5_edge_ori.py` read.
* BSDS-ownership `{trainfg,testfg}/<id>.mat` with `gtStruct.gt_theta`: a cell
  of per-annotator H x W x 2 arrays (channel 0 edge in {0, 1}, channel 1
  theta in [-pi, pi]).

Both store the DOC convention, which is ours up to the wrap: DOOBNet's
augmentation maps `np.fliplr` to theta -> -theta and `np.rot90(., k)` to
theta -> theta - k*pi/2, i.e. angles in the y-down image frame with the
occluder on the left.  A stored -pi becomes +pi.  Non-finite angles on a
boundary pixel make that pixel invalid (kept as boundary, orientation 0).
"""

import os

import numpy as np
import scipy.io

from relations import io_util


class OcclusionFormatError(ValueError):
  """An annotation file is missing or does not have the expected structure."""


def to_internal_angle(theta):
  """Wraps radians to (-pi, pi]; float32 out, same shape.

  Angles within 1e-6 rad above -pi map to +pi: float32(pi) is slightly above
  pi, and re-wrapping it must give pi again (idempotent on float32).
  """
  t = np.mod(np.asarray(theta, np.float64) + np.pi, 2 * np.pi) - np.pi
  return np.where(t <= -np.pi + 1e-6, t + 2 * np.pi, t).astype(np.float32)


def _finish(path, boundaries, theta):
  """Builds the internal (boundaries, orientation, valid) triple."""
  theta = np.asarray(theta, np.float64)
  finite = np.isfinite(theta)
  valid = boundaries & finite
  orientation = np.where(valid, to_internal_angle(np.where(finite, theta, 0)), 0).astype(np.float32)
  if boundaries.shape != theta.shape:
    raise OcclusionFormatError(
      f"{path}: edge map shape {boundaries.shape} != orientation shape {theta.shape}"
    )
  return dict(boundaries=boundaries, orientation=orientation, valid=valid)


def _loadmat(path):
  if not os.path.isfile(path):
    raise OcclusionFormatError(f"{path}: annotation file is missing")
  try:
    return scipy.io.loadmat(path)
  except Exception as e:  # scipy raises several types for corrupt files.
    raise OcclusionFormatError(f"{path}: not a readable .mat file ({e})") from e


def _field(path, struct, name, record):
  """struct[name][0, 0] of a loadmat struct array, or an error naming it."""
  try:
    if struct.dtype.names is None or name not in struct.dtype.names:
      raise KeyError(name)
    return struct[name][0, 0]
  except (KeyError, IndexError, AttributeError) as e:
    raise OcclusionFormatError(f"{path}: {record} has no field {name!r}") from e


# ----------------------------------------------------------------------------
# PIOD.
# ----------------------------------------------------------------------------


def read_piod(path):
  """Reads a PIOD `bndinfo_pascal` .mat file.

  Args:
    path: `.../Data/<id>.mat`.

  Returns:
    dict with "boundaries" bool [H, W], "orientation" float32 [H, W] and
    "valid" bool [H, W] in the internal convention.

  Raises:
    OcclusionFormatError: naming the file and the field that is missing or
      malformed (e.g. an index outside the image).
  """
  mat = _loadmat(path)
  if "bndinfo_pascal" not in mat:
    raise OcclusionFormatError(f"{path}: no variable 'bndinfo_pascal'")
  bnd = mat["bndinfo_pascal"]
  rec = "bndinfo_pascal"
  orient = np.asarray(_field(path, bnd, "OrientMap", rec), np.float64)
  imsize = np.asarray(_field(path, bnd, "imsize", rec)).ravel()
  if imsize.size != 2:
    raise OcclusionFormatError(f"{path}: bndinfo_pascal.imsize must hold [H W], got {imsize}")
  h, w = int(imsize[0]), int(imsize[1])
  if orient.shape != (h, w):
    raise OcclusionFormatError(
      f"{path}: bndinfo_pascal.OrientMap has shape {orient.shape}, imsize says {(h, w)}"
    )
  ne = int(np.asarray(_field(path, bnd, "ne", rec)).ravel()[0])
  boundaries = np.zeros((h, w), bool)
  if ne > 0:
    edges = _field(path, bnd, "edges", rec)
    cells = np.asarray(_field(path, edges, "indices", rec + ".edges")).ravel()
    if cells.size != ne:
      raise OcclusionFormatError(
        f"{path}: bndinfo_pascal.edges.indices has {cells.size} fragments, ne = {ne}"
      )
    flat = boundaries.reshape(-1, order="F")  # a view in MATLAB order
    for i, cell in enumerate(cells):
      idx = np.asarray(cell, np.float64).ravel()
      if idx.size and (idx.min() < 1 or idx.max() > h * w or np.any(idx != np.round(idx))):
        raise OcclusionFormatError(
          f"{path}: bndinfo_pascal.edges.indices{{{i + 1}}} holds an index outside 1..{h * w}"
        )
      flat[idx.astype(np.int64) - 1] = True
    boundaries = flat.reshape((h, w), order="F")
  return _finish(path, boundaries, orient)


def write_piod(path, orient_map, fragments):
  """Writes a PIOD-structured .mat (for dummy data and tests).

  Args:
    path: output `.mat` path.
    orient_map: float [H, W] radians (DOC convention).
    fragments: list of (ys, xs) integer arrays, one per edge fragment.
  """
  h, w = np.asarray(orient_map).shape
  cells = np.empty((1, len(fragments)), dtype=object)
  for i, (ys, xs) in enumerate(fragments):
    lin = np.asarray(xs) * h + np.asarray(ys) + 1  # MATLAB column-major
    cells[0, i] = lin.astype(np.float64).reshape(-1, 1)
  bnd = {
    "imsize": np.array([[h, w]], np.float64),
    "ne": np.array([[len(fragments)]], np.float64),
    "edges": {"indices": cells},
    "OrientMap": np.asarray(orient_map, np.float64),
  }
  _savemat(path, {"bndinfo_pascal": bnd})


# ----------------------------------------------------------------------------
# BSDS ownership.
# ----------------------------------------------------------------------------


def read_bsds_ownership(path):
  """Reads a BSDS-ownership `gtStruct.gt_theta` .mat file.

  Args:
    path: `.../{trainfg,testfg}/<id>.mat`.

  Returns:
    list (one per annotator) of dicts with "boundaries", "orientation",
    "valid" as in `read_piod`.

  Raises:
    OcclusionFormatError: naming the file and the field or annotator.
  """
  mat = _loadmat(path)
  if "gtStruct" not in mat:
    raise OcclusionFormatError(f"{path}: no variable 'gtStruct'")
  cells = np.asarray(_field(path, mat["gtStruct"], "gt_theta", "gtStruct")).ravel()
  if cells.size == 0:
    raise OcclusionFormatError(f"{path}: gtStruct.gt_theta has no annotator")
  out = []
  for i, cell in enumerate(cells):
    a = np.asarray(cell)
    if a.ndim != 3 or a.shape[2] != 2:
      raise OcclusionFormatError(
        f"{path}: gtStruct.gt_theta{{{i + 1}}} must be H x W x 2, got {a.shape}"
      )
    edge = np.asarray(a[..., 0], np.float64)
    if not np.all((edge == 0) | (edge == 1)):
      raise OcclusionFormatError(f"{path}: gtStruct.gt_theta{{{i + 1}}}(:,:,1) must be 0/1")
    out.append(_finish(path, edge == 1, a[..., 1]))
    if out[-1]["boundaries"].shape != out[0]["boundaries"].shape:
      raise OcclusionFormatError(f"{path}: annotator {i + 1} has a different size than annotator 1")
  return out


def write_bsds_ownership(path, annotators):
  """Writes a BSDS-ownership-structured .mat (for dummy data and tests).

  Args:
    path: output `.mat` path.
    annotators: list of (edge [H, W] in {0, 1}, theta [H, W] radians).
  """
  cells = np.empty((1, len(annotators)), dtype=object)
  for i, (edge, theta) in enumerate(annotators):
    cells[0, i] = np.stack([np.asarray(edge, np.float64), np.asarray(theta, np.float64)], -1)
  _savemat(path, {"gtStruct": {"gt_theta": cells}})


def _savemat(path, variables):
  with io_util.atomic_path(path) as tmp, open(tmp, "wb") as f:
    scipy.io.savemat(f, variables, do_compression=True)
