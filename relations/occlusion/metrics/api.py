"""Python API: score arrays or a prediction directory (B-, O- metrics, AC).

Headline keys (fractions): B-ODS, B-OIS, B-AP (boundary curve on the full GT
B), O-ODS, O-OIS, O-AP and AC.  The O-curve is doobscripts' `_poc` (recall =
boundary recall; precision counts matched predictions with a correct angle)
unless `valid_only`, in which case it is `valid_poc`: matching
is still done against the full B (localisation is judged on every OB pixel,
as the paper's boundary metrics are), then recall = matched valid GT / valid
GT, and precision = predictions matched to valid GT with a correct angle /
(all predictions - those matched only to invalid GT).  This is the
`_poc` rule restricted to pixels that are "valid-orientation and correctly
localised", and a prediction whose only counterpart has no orientation
evidence is neither rewarded nor penalised.  All candidate curves are also
returned under "curves".

`matcher="bsds"` computes the per-image counts with the BSDS matcher
(pyEdgeEval, `bsds.py`) instead of the exact one; the summary records it.
The BSDS matcher holds the GIL, so its images run one at a time per process.
"""

import concurrent.futures
import os

import numpy as np

from relations.occlusion.data import realoob_io
from relations.occlusion.metrics import aggregate
from relations.occlusion.metrics import bsds
from relations.occlusion.metrics import image_eval
from relations.occlusion.metrics import nms
from relations.occlusion.metrics import pred_readers

HEADLINE = ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP", "AC")


def image_seed(bsds_seed, index):
  """The BSDS matcher seed of image `index` (0 when `bsds_seed` is 0)."""
  return bsds_seed + index if bsds_seed else 0


def check_matcher(matcher, bsds_seed=0):
  """Validates the matcher arguments; raises before any image is read.

  Raises:
    ValueError: unknown matcher or a seed outside [0, 2^40).
    bsds.MatcherUnavailableError: "bsds" without pyEdgeEval (one line that
      says how to install it).
  """
  if matcher not in image_eval.MATCHERS:
    raise ValueError(f"matcher must be one of {image_eval.MATCHERS}, got {matcher!r}")
  if not 0 <= int(bsds_seed) < 1 << 40:
    raise ValueError(f"bsds_seed must be in [0, 2^40), got {bsds_seed}")
  if matcher == "bsds":
    bsds.require()


def _score_one(sample, protocol, nthresh, max_dist, border, with_ac, matcher="exact", bsds_seed=0):
  if isinstance(sample, _LazyPair):
    sample = sample._load()  # pylint: disable=protected-access
  counts = image_eval.evaluate_image(
    sample["prob"],
    sample["gts"],
    sample.get("theta_pred"),
    sample.get("theta_gts"),
    sample.get("valids"),
    protocol=protocol,
    nthresh=nthresh,
    max_dist=max_dist,
    border=border,
    matcher=matcher,
    bsds_seed=bsds_seed,
  )
  if with_ac:
    counts["crispness"] = nms.crispness(sample["prob"])
  return counts


THRESHOLD_SETS = ("99", "iobe")
# IOBE's shipped doobscripts (`EvaluateSingle.m`, loop `t = 51:nthresh`)
# score only 0.51 ... 0.99 of the 99 thresholds; rows 1-50 keep their
# zero-initialised counts (R = P = 0).  sumR is kept: doobscripts set it for
# every threshold before that loop (DOOBNet's EvaluateSingle.m; IOBE's copy
# ships inside a zip, so this is inferred).  It matters only for OIS on an
# image whose F is 0 everywhere.  TPENet's published numbers use this set.
_IOBE_FIRST = 50


def apply_threshold_set(counts, threshold_set="99"):
  """Per-image counts as a threshold set would have produced them.

  Args:
    counts: one `image_eval.evaluate_image` dict, computed at 99 thresholds.
    threshold_set: "99" (every threshold, doobscripts; unchanged) or "iobe"
      (IOBE / TPENet: thresholds 0.01 ... 0.50 not evaluated, their counts
      zero except the GT totals sum_r / sum_r_valid).

  Returns:
    the counts dict (a modified copy for "iobe").
  """
  if threshold_set not in THRESHOLD_SETS:
    raise ValueError(f"threshold_set must be one of {THRESHOLD_SETS}, got {threshold_set!r}")
  if threshold_set == "99":
    return counts
  if len(counts["thresholds"]) != 99:
    raise ValueError(
      f"threshold_set 'iobe' needs the 99 standard thresholds, got {len(counts['thresholds'])}"
    )
  out = dict(counts)
  for k in image_eval.COUNT_KEYS:
    if k in ("sum_r", "sum_r_valid"):
      continue
    v = np.array(counts[k], copy=True)
    v[:_IOBE_FIRST] = 0
    out[k] = v
  return out


def summarize_counts(per_image, valid_only=False, with_orientation=True):
  """Aggregates per-image counts (from `image_eval.evaluate_image`).

  Args:
    per_image: list of count dicts.
    valid_only: use the `valid_poc` curve for the O-metrics.
    with_orientation: the predictions carry orientation.  False (boundary
      only, Table 3's "-" rows): O-ODS/OIS/AP are None and only the boundary
      curve is returned; counts taken against a missing angle would score
      every prediction as angle 0.

  Returns:
    dict with the HEADLINE keys (O-* None without orientation), "curves"
    (per curve name: ODS/OIS/AP and the R/P/F lists), "thresholds",
    "num_images" and "o_curve" (None without orientation).
  """
  if not per_image:
    raise ValueError("no images to summarize")
  thr = per_image[0]["thresholds"]
  stack = {k: np.stack([c[k] for c in per_image]) for k in image_eval.COUNT_KEYS}
  curves = {}
  names = image_eval.CURVES if with_orientation else ("boundary",)
  for name in names:
    a, b, c, d = image_eval.CURVES[name]
    curves[name] = aggregate.summarize(thr, stack[a], stack[b], stack[c], stack[d])
  b = curves["boundary"]
  out = {"B-ODS": b["ODS"], "B-OIS": b["OIS"], "B-AP": b["AP"]}
  if with_orientation:
    o = curves["valid_poc" if valid_only else "poc"]
    out.update({"O-ODS": o["ODS"], "O-OIS": o["OIS"], "O-AP": o["AP"]})
  else:
    out.update({"O-ODS": None, "O-OIS": None, "O-AP": None})
  cr = [c["crispness"] for c in per_image if "crispness" in c]
  cr = [x for x in cr if np.isfinite(x)]
  out["AC"] = float(np.mean(cr)) if cr else float("nan")
  out["o_curve"] = ("valid_poc" if valid_only else "poc") if with_orientation else None
  out["curves"] = curves
  out["thresholds"] = np.asarray(thr).tolist()
  out["num_images"] = len(per_image)
  return out


def per_source(summary, sources):
  """Headline metrics per source (RealOOB's DIODE / EntitySeg / PIOD / LF4D rows).

  Args:
    summary: an `evaluate_dir` result ("per_image", "ids", "o_curve").
    sources: {id: source}; ids it does not list are grouped as "(none)".

  Returns:
    {source: HEADLINE metrics (O-* None without orientation) + "num_images"}.
  """
  groups = {}
  for image_id, counts in zip(summary["ids"], summary["per_image"]):
    groups.setdefault(sources.get(image_id, "(none)"), []).append(counts)
  o_curve = summary.get("o_curve")
  out = {}
  for src in sorted(groups):
    res = summarize_counts(
      groups[src], valid_only=o_curve == "valid_poc", with_orientation=o_curve is not None
    )
    out[src] = {k: res[k] for k in HEADLINE}
    out[src]["num_images"] = len(groups[src])
  return out


def evaluate_arrays(
  samples,
  protocol="doob",
  valid_only=False,
  border=0,
  nthresh=99,
  max_dist=0.0075,
  with_ac=True,
  num_workers=None,
  matcher="exact",
  bsds_seed=0,
  with_orientation=None,
  threshold_set="99",
):
  """Scores in-memory predictions.

  Args:
    samples: iterable of dicts with "prob" float [H, W] in [0, 1], "gts" list
      of bool [H, W]; optional "theta_pred" float [H, W] (radians),
      "theta_gts" list of float [H, W], "valids" list of bool [H, W].
    protocol: "doob" (NMS once, default) or "seval" (thinning per threshold).
    valid_only: O-metrics on valid-orientation GT pixels (`valid_poc`).
    border: border exclusion in pixels (RealOOB: 2).
    nthresh: number of thresholds.
    max_dist: matching tolerance, fraction of the image diagonal.
    with_ac: also compute the average crispness AC.
    num_workers: threads (numba kernels release the GIL); default: CPUs.
    matcher: "exact" (default) or "bsds" (BSDS `correspondPixels` through
      pyEdgeEval; slower, random, what published tables used).
    bsds_seed: "bsds" only; 0 (default): the matcher's clock-seeded stream,
      as in BSDS; n > 0: image i is matched with seed n + i, reproducibly
      for any `num_workers`.
    with_orientation: score the O-metrics; None: when every sample has a
      "theta_pred" (False: O-* are None, see `summarize_counts`).
    threshold_set: "99" (default) or "iobe" (`apply_threshold_set`).

  Returns:
    `summarize_counts` dict plus "per_image" counts, "matcher" and
    "threshold_set".
  """
  check_matcher(matcher, bsds_seed)
  if threshold_set not in THRESHOLD_SETS:
    raise ValueError(f"threshold_set must be one of {THRESHOLD_SETS}, got {threshold_set!r}")
  samples = list(samples)
  if with_orientation is None:
    with_orientation = all(s.get("theta_pred") is not None for s in samples)
  for i, s in enumerate(samples):
    h, w = np.shape(s["prob"])[:2]
    if border * 2 >= min(h, w):  # border_mask would exclude every pixel: nothing to score
      raise ValueError(
        f"image {s.get('id', i)}: a {border}-pixel border leaves no pixel of "
        f"the {h}x{w} image; expected --border <= {(min(h, w) - 1) // 2}"
      )
  workers = num_workers or min(len(samples), os.cpu_count() or 1) or 1
  args = (protocol, nthresh, max_dist, border, with_ac, matcher)

  def score(i):
    return _score_one(samples[i], *args, bsds_seed=image_seed(bsds_seed, i))

  if workers <= 1:
    per_image = [score(i) for i in range(len(samples))]
  else:
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
      per_image = list(ex.map(score, range(len(samples))))
  return finish_counts(per_image, valid_only, with_orientation, threshold_set, matcher)


def finish_counts(per_image, valid_only, with_orientation, threshold_set, matcher):
  """`summarize_counts` after `apply_threshold_set`, with the run's settings."""
  per_image = [apply_threshold_set(c, threshold_set) for c in per_image]
  out = summarize_counts(per_image, valid_only=valid_only, with_orientation=with_orientation)
  out["per_image"] = per_image
  out["matcher"] = matcher
  out["threshold_set"] = threshold_set
  return out


def _png_shape(path):
  """(H, W) from a PNG's IHDR chunk, without decoding; None if not a PNG."""
  with open(path, "rb") as f:
    head = f.read(24)
  if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
    return None
  return (int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big"))


def check_dir(gt_dir, pred_dir, ids, with_orientation=True, pred_format="ours"):
  """Reports every missing, non-PNG or size-mismatched file at once.

  Raises:
    realoob_io.RealOOBFormatError listing all problems by id.
  """
  problems = []
  for i in ids:
    need = [
      (gt_dir, realoob_io.BOUNDARIES),
      (gt_dir, realoob_io.ORIENTATION),
      (gt_dir, realoob_io.VALID),
    ]
    if pred_format == "ours":
      need.append((pred_dir, realoob_io.BOUNDARIES))
      if with_orientation:
        need.append((pred_dir, realoob_io.ORIENTATION))
    shapes = {}
    for root, field in need:
      p = realoob_io.field_path(root, field, i)
      if not os.path.isfile(p):
        problems.append(f"{i}: missing {p}")
        continue
      shape = _png_shape(p)
      if shape is None:
        problems.append(f"{i}: {p} is not a PNG file")
      else:
        shapes[p] = shape
    if len(set(shapes.values())) > 1:
      problems.append(
        f"{i}: sizes differ (predictions must be at the GT's "
        "native resolution): " + ", ".join(f"{p} {h}x{w}" for p, (h, w) in shapes.items())
      )
    elif pred_format != "ours":
      gt_shape = next(iter(shapes.values()), None)
      problems += pred_readers.check(pred_dir, pred_format, i, with_orientation, gt_shape)
  if problems:
    raise realoob_io.RealOOBFormatError(
      f"{len(problems)} problem(s) with the inputs:\n  " + "\n  ".join(problems)
    )


def load_pair(gt_dir, pred_dir, image_id, with_orientation=True, pred_format="ours"):
  """Reads one GT/prediction pair of the RealOOB layout into a sample dict."""
  gt = realoob_io.read_gt(gt_dir, image_id)
  pr = pred_readers.read(pred_dir, pred_format, image_id, with_orientation)
  if pr["boundaries"].shape != gt["boundaries"].shape:
    raise realoob_io.RealOOBFormatError(
      f"{image_id}: prediction {pred_readers.paths(pred_dir, pred_format, image_id)['boundaries']} "
      f"has shape {pr['boundaries'].shape}, GT has "
      f"{gt['boundaries'].shape} (predictions must be at native resolution)"
    )
  return {
    "id": image_id,
    "prob": pr["boundaries"],
    "theta_pred": pr.get("orientation"),
    "gts": [gt["boundaries"]],
    "theta_gts": [gt["orientation"]],
    "valids": [gt["valid"]],
  }


class _LazyPair:
  """A sample dict that reads its files on first access."""

  def __init__(self, gt_dir, pred_dir, image_id, with_orientation, pred_format="ours"):
    self._args = (gt_dir, pred_dir, image_id, with_orientation, pred_format)
    self._data = None

  def _load(self):
    if self._data is None:
      self._data = load_pair(*self._args)
    return self._data

  def __getitem__(self, key):
    return self._load()[key]

  def get(self, key, default=None):
    return self._load().get(key, default)


def evaluate_dir(
  gt_dir,
  pred_dir,
  protocol="doob",
  valid_only=True,
  border=2,
  split=None,
  ids=None,
  nthresh=99,
  max_dist=0.0075,
  with_orientation=True,
  num_workers=None,
  matcher="exact",
  bsds_seed=0,
  pred_format="ours",
  threshold_set="99",
):
  """Scores a prediction directory against a RealOOB-layout GT directory.

  Args:
    gt_dir: dataset root (boundaries/, orientation/, valid/, splits/).
    pred_dir: prediction root (boundaries/, orientation/).
    protocol: "doob" or "seval".
    valid_only: O-metrics on valid GT pixels (RealOOB default True).
    border: border exclusion in pixels (RealOOB default 2).
    split: read ids from `gt_dir/splits/<split>.txt`.
    ids: explicit ids; default: all ids in `gt_dir/boundaries/`.
    nthresh, max_dist: see `evaluate_arrays`.
    with_orientation: predictions carry orientation maps.
    num_workers: threads.
    matcher, bsds_seed, threshold_set: see `evaluate_arrays`.
    pred_format: one of `pred_readers.PRED_FORMATS` (default "ours").

  Returns:
    `evaluate_arrays` dict plus "ids".
  """
  if ids is None:
    ids = realoob_io.read_split(gt_dir, split) if split else realoob_io.list_ids(gt_dir)
  ids = list(ids)
  check_matcher(matcher, bsds_seed)
  if not ids:
    raise realoob_io.RealOOBFormatError(f"{gt_dir}: no images to evaluate")
  check_dir(gt_dir, pred_dir, ids, with_orientation, pred_format)
  # Samples are decoded lazily inside the workers to bound memory.
  samples = (_LazyPair(gt_dir, pred_dir, i, with_orientation, pred_format) for i in ids)
  out = evaluate_arrays(
    samples,
    protocol=protocol,
    valid_only=valid_only,
    border=border,
    nthresh=nthresh,
    max_dist=max_dist,
    num_workers=num_workers,
    matcher=matcher,
    bsds_seed=bsds_seed,
    with_orientation=with_orientation,
    threshold_set=threshold_set,
  )
  out["ids"] = ids
  return out
