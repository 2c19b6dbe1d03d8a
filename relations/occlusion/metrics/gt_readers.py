"""Ground truth of the three on-disk formats for the occlusion evaluator.

`--gt DIR` of `python -m relations.evaluate occlusion` may be:

* `realoob`: the project's RealOOB layout (boundaries/, orientation/,
  valid/, splits/), scored by `api.evaluate_dir`;
* `piod`: a PIOD root (`Data/<id>.mat` with `bndinfo_pascal`,
  `val_doc_2010.txt` = test ids, every other `Data/*.mat` = train), or a
  folder of such .mat files;
* `bsds_ownership`: a BSDS-ownership root (`testfg/<id>.mat`,
  `trainfg/<id>.mat` with `gtStruct.gt_theta`; the test ids are
  `Augmentation/test_ori_iids.lst` when present, else every `testfg/*.mat`),
  or a folder of such .mat files.

The .mat files are read by `relations.occlusion.data.formats` (the TFDS
builder's readers), which return the project's internal convention (angles
in (-pi, pi], left-hand rule, image frame); DOC's convention is the same up
to the wrap, so the O-metrics are unaffected by the conversion.

Protocol defaults per format follow the tools each format's published
numbers come from:

* realoob: 2-pixel border exclusion, O-metrics on the valid-orientation
  subset (`valid_poc`), exactly as `api.evaluate_dir`;
* piod / bsds_ownership: doobscripts (`EvaluateBoundary.m` /
  `EvaluateSingle.m`) exclude no border and have no validity map, so the
  border is 0 and the O-curve is `_poc` over every GT pixel.  A non-finite
  stored angle on a boundary pixel (the reader marks it not valid) is
  compared as NaN, hence never orientation-correct, as MATLAB's
  `match_theta` comparison would do.  Several BSDS annotators are matched
  separately: recall sums over annotators, a prediction pixel counts if it
  matches in any of them.

Predictions use the project's prediction layout under `--pred`
(`boundaries/<id>.png` uint16 probability, `orientation/<id>.png` uint16
angle code) or another tool's format (`pred_format`, `pred_readers.py`),
at the GT's native resolution.  Before anything is scored, every
GT file is read and every prediction header checked; all missing, unreadable
or size-mismatched files are reported at once, by id.
"""

import concurrent.futures
import os

import numpy as np
import scipy.io

from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import realoob_io
from relations.occlusion.metrics import api
from relations.occlusion.metrics import image_eval
from relations.occlusion.metrics import nms
from relations.occlusion.metrics import pred_readers

FORMATS = ("realoob", "piod", "bsds_ownership")
DEFAULT_BORDER = {"realoob": 2, "piod": 0, "bsds_ownership": 0}
DEFAULT_VALID_ONLY = {"realoob": True, "piod": False, "bsds_ownership": False}
# The .mat variable each format stores (used to sniff a flat folder).
_MAT_VARIABLE = {"piod": "bndinfo_pascal", "bsds_ownership": "gtStruct"}

GTFormatError = occlusion_formats.OcclusionFormatError


def _mat_files(directory):
  return sorted(n for n in os.listdir(directory) if n.endswith(".mat") and not n.startswith("."))


def _sniff_mat(path):
  """The format whose variable a .mat file holds, or None."""
  try:
    names = {v[0] for v in scipy.io.whosmat(path)}
  except Exception as e:  # scipy raises several types for corrupt files.
    raise GTFormatError(f"{path}: not a readable .mat file ({e})") from e
  hits = [f for f, var in _MAT_VARIABLE.items() if var in names]
  return hits[0] if len(hits) == 1 else None


def detect_format(gt_dir):
  """Guesses the GT format of a directory; errors when not unambiguous.

  Args:
    gt_dir: the `--gt` directory.

  Returns:
    one of FORMATS.

  Raises:
    GTFormatError: the directory is missing, matches no format or several.
  """
  if not os.path.isdir(gt_dir):
    raise GTFormatError(f"{gt_dir}: GT directory is missing")
  isdir = lambda *p: os.path.isdir(os.path.join(gt_dir, *p))
  found = []
  if isdir(realoob_io.BOUNDARIES):
    found.append("realoob")
  if isdir("Data"):
    found.append("piod")
  if isdir("testfg") or isdir("trainfg"):
    found.append("bsds_ownership")
  if not found:
    mats = _mat_files(gt_dir)
    if mats:
      path = os.path.join(gt_dir, mats[0])
      fmt = _sniff_mat(path)
      if fmt is None:
        raise GTFormatError(
          f"{path}: holds neither 'bndinfo_pascal' (PIOD) nor 'gtStruct' "
          "(BSDS ownership); pass --gt-format"
        )
      return fmt
  if len(found) == 1:
    return found[0]
  if found:
    raise GTFormatError(
      f"{gt_dir}: ambiguous GT format (looks like {' and '.join(found)}); pass --gt-format"
    )
  raise GTFormatError(
    f"{gt_dir}: unknown GT format: expected boundaries/ (realoob), Data/ "
    "(piod), testfg/ or trainfg/ (bsds_ownership), or a folder of .mat "
    "files; pass --gt-format"
  )


def _read_id_list(path):
  """Ids of a list file in order; a repeated id is scored once."""
  with open(path, encoding="utf-8") as f:
    ids = [line.strip() for line in f if line.strip()]
  return list(dict.fromkeys(ids))


def list_gt_files(gt_dir, gt_format, split=None):
  """Ids and annotation paths of a PIOD / BSDS-ownership GT directory.

  Args:
    gt_dir: dataset root or a folder of .mat files.
    gt_format: "piod" or "bsds_ownership".
    split: None or "test" (the official evaluation list; default) or
      "train"; must be None for a flat folder of .mat files (all evaluated).

  Returns:
    list of (image id, .mat path); a listed id whose file is absent is kept
    (the input check reports it).

  Raises:
    GTFormatError: an unknown split, or a list/folder that is missing.
  """
  if gt_format not in _MAT_VARIABLE:
    raise ValueError(f"not a .mat GT format: {gt_format!r}")
  if not os.path.isdir(gt_dir):
    raise GTFormatError(f"{gt_dir}: GT directory is missing")
  j = lambda *p: os.path.join(gt_dir, *p)
  is_root = (
    os.path.isdir(j("Data"))
    if gt_format == "piod"
    else os.path.isdir(j("testfg")) or os.path.isdir(j("trainfg"))
  )
  if not is_root:
    if split is not None:
      raise GTFormatError(
        f"{gt_dir}: --split needs the dataset root (with "
        f"{'Data/' if gt_format == 'piod' else 'testfg/, trainfg/'}); "
        "a folder of .mat files is evaluated whole"
      )
    names = _mat_files(gt_dir)
    return [(n[:-4], j(n)) for n in names]
  split = split or "test"
  if split not in ("test", "train"):
    raise GTFormatError(f"{gt_dir}: {gt_format} has splits 'test' and 'train', got {split!r}")
  if gt_format == "piod":
    lst = j("val_doc_2010.txt")
    if not os.path.isfile(lst):
      raise GTFormatError(f"{lst}: PIOD test list is missing")
    test_ids = _read_id_list(lst)
    if split == "test":
      ids = test_ids
    else:
      test = set(test_ids)
      ids = [n[:-4] for n in _mat_files(j("Data")) if n[:-4] not in test]
    return [(i, j("Data", f"{i}.mat")) for i in ids]
  folder = "testfg" if split == "test" else "trainfg"
  if not os.path.isdir(j(folder)):
    raise GTFormatError(f"{j(folder)}: BSDS-ownership folder is missing")
  lst = j("Augmentation", "test_ori_iids.lst")
  if split == "test" and os.path.isfile(lst):
    ids = _read_id_list(lst)
  else:
    ids = [n[:-4] for n in _mat_files(j(folder))]
  return [(i, j(folder, f"{i}.mat")) for i in ids]


def read_annotations(path, gt_format):
  """Reads one .mat GT file into evaluator inputs.

  Args:
    path: the .mat file.
    gt_format: "piod" or "bsds_ownership".

  Returns:
    dict with "gts" list (one per annotator) of bool [H, W], "theta_gts"
    list of float32 [H, W] radians (NaN on boundary pixels whose stored
    angle is not finite) and "valids" list of bool [H, W].
  """
  if gt_format == "piod":
    anns = [occlusion_formats.read_piod(path)]
  else:
    anns = occlusion_formats.read_bsds_ownership(path)
  theta = [
    np.where(a["boundaries"] & ~a["valid"], np.float32(np.nan), a["orientation"]).astype(np.float32)
    for a in anns
  ]
  return {
    "gts": [a["boundaries"] for a in anns],
    "theta_gts": theta,
    "valids": [a["valid"] for a in anns],
  }


def _compact(ann):
  """Boundary pixels only (the dense maps of a whole split need not fit)."""
  shape = ann["gts"][0].shape
  per = []
  for g, t, v in zip(ann["gts"], ann["theta_gts"], ann["valids"]):
    yx = np.argwhere(g).astype(np.int32)
    per.append((yx, t[g], v[g]))
  return shape, per


def _expand(compact):
  shape, per = compact
  out = {"gts": [], "theta_gts": [], "valids": []}
  for yx, t, v in per:
    g = np.zeros(shape, bool)
    g[yx[:, 0], yx[:, 1]] = True
    theta = np.zeros(shape, np.float32)
    theta[yx[:, 0], yx[:, 1]] = t
    valid = np.zeros(shape, bool)
    valid[yx[:, 0], yx[:, 1]] = v
    out["gts"].append(g)
    out["theta_gts"].append(theta)
    out["valids"].append(valid)
  return out


def load_checked(files, gt_format, pred_dir, with_orientation=True, pred_format="ours"):
  """Reads every GT file and checks every prediction; reports all at once.

  Args:
    files: list of (id, .mat path) from `list_gt_files`.
    gt_format: "piod" or "bsds_ownership".
    pred_dir: prediction root.
    with_orientation: predictions must carry orientation.
    pred_format: one of `pred_readers.PRED_FORMATS`.

  Returns:
    dict id -> compact GT (boundary pixels and their angles/validity).

  Raises:
    GTFormatError: listing every problem as "<id>: ...".
  """
  problems = []
  gts = {}
  for image_id, path in files:
    try:
      gts[image_id] = _compact(read_annotations(path, gt_format))
      shape = gts[image_id][0]
    except GTFormatError as e:
      problems.append(f"{image_id}: {e}")
      shape = None
    problems += pred_readers.check(pred_dir, pred_format, image_id, with_orientation, shape)
  if problems:
    raise GTFormatError(f"{len(problems)} problem(s) with the inputs:\n  " + "\n  ".join(problems))
  return gts


def evaluate_dir(
  gt_dir,
  pred_dir,
  gt_format=None,
  split=None,
  border=None,
  valid_only=None,
  protocol="doob",
  nthresh=99,
  max_dist=0.0075,
  with_orientation=True,
  num_workers=None,
  matcher="exact",
  bsds_seed=0,
  pred_format="ours",
  threshold_set="99",
):
  """Scores a prediction directory against GT of any supported format.

  Args:
    gt_dir: GT directory (see the module docstring).
    pred_dir: prediction root in the project's prediction layout.
    gt_format: one of FORMATS, or None to detect it (`detect_format`).
    split: realoob: `splits/<split>.txt` (None: every id); piod /
      bsds_ownership roots: "test" (None) or "train".
    border: border exclusion in pixels; None: the format's default
      (realoob 2, otherwise 0).
    valid_only: O-metrics on valid-orientation GT (`valid_poc`); None: the
      format's default (realoob True, otherwise False = doobscripts `_poc`).
    protocol, nthresh, max_dist, with_orientation, num_workers, matcher,
      bsds_seed, threshold_set: see `api.evaluate_arrays`.
    pred_format: one of `pred_readers.PRED_FORMATS` (default "ours").

  Returns:
    the `api.evaluate_arrays` summary plus "ids", "gt_format", "border" and
    "valid_only".
  """
  api.check_matcher(matcher, bsds_seed)
  fmt = gt_format or detect_format(gt_dir)
  if fmt not in FORMATS:
    raise ValueError(f"gt_format must be one of {FORMATS}, got {fmt!r}")
  border = DEFAULT_BORDER[fmt] if border is None else border
  valid_only = DEFAULT_VALID_ONLY[fmt] if valid_only is None else valid_only
  if fmt == "realoob":
    out = api.evaluate_dir(
      gt_dir,
      pred_dir,
      protocol=protocol,
      valid_only=valid_only,
      border=border,
      split=split,
      nthresh=nthresh,
      max_dist=max_dist,
      with_orientation=with_orientation,
      num_workers=num_workers,
      matcher=matcher,
      bsds_seed=bsds_seed,
      pred_format=pred_format,
      threshold_set=threshold_set,
    )
  else:
    files = list_gt_files(gt_dir, fmt, split)
    if not files:
      raise GTFormatError(f"{gt_dir}: no images to evaluate")
    if threshold_set not in api.THRESHOLD_SETS:
      raise ValueError(f"threshold_set must be one of {api.THRESHOLD_SETS}, got {threshold_set!r}")
    gts = load_checked(files, fmt, pred_dir, with_orientation, pred_format)
    ids = [i for i, _ in files]
    out = _evaluate_mat(
      pred_dir,
      ids,
      gts,
      protocol,
      valid_only,
      border,
      nthresh,
      max_dist,
      with_orientation,
      num_workers,
      matcher,
      bsds_seed,
      pred_format,
      threshold_set,
    )
    out["ids"] = ids
  out.update(gt_format=fmt, border=border, valid_only=valid_only)
  return out


def _evaluate_mat(
  pred_dir,
  ids,
  gts,
  protocol,
  valid_only,
  border,
  nthresh,
  max_dist,
  with_orientation,
  num_workers,
  matcher="exact",
  bsds_seed=0,
  pred_format="ours",
  threshold_set="99",
):
  """Scores checked .mat GT; each image is decoded inside its worker."""

  def score(index):
    image_id = ids[index]
    pr = pred_readers.read(pred_dir, pred_format, image_id, with_orientation)
    ann = _expand(gts[image_id])
    counts = image_eval.evaluate_image(
      pr["boundaries"],
      ann["gts"],
      pr.get("orientation"),
      ann["theta_gts"],
      ann["valids"],
      protocol=protocol,
      nthresh=nthresh,
      max_dist=max_dist,
      border=border,
      matcher=matcher,
      bsds_seed=api.image_seed(bsds_seed, index),
    )
    counts["crispness"] = nms.crispness(pr["boundaries"])
    return counts

  workers = num_workers or min(len(ids), os.cpu_count() or 1) or 1
  if workers <= 1:
    per_image = [score(i) for i in range(len(ids))]
  else:  # the numba kernels release the GIL
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
      per_image = list(ex.map(score, range(len(ids))))
  return api.finish_counts(per_image, valid_only, with_orientation, threshold_set, matcher)
