"""doobscripts' result tables (`eval_bdry*.txt`): writing and reading.

doobscripts' `collect_eval_bdry_v2.m` (DOOBNet, OFNet, P2ORM, MT-ORL and
IOBE all ship it) turns the per-image count files into three tables per
curve, which plotting scripts (`plot_multi_eval_v2.m`,
`plot_multi_occ_acc_eval.m`) and people's spreadsheets read:

  eval_bdry<app>.txt      one row: ODS-T ODS-R ODS-P ODS-F OIS-R OIS-P OIS-F AP
  eval_bdry_thr<app>.txt  the dataset curve, T R P F, one row per distinct R
                          (MATLAB `unique`, first occurrence), R descending
  eval_bdry_img<app>.txt  per image: index T R P F of its own best F,
                          interpolated between thresholds like the ODS

every number printed with MATLAB's `%10g` (`%10d` for the index).  With
orientation `<app>` is `_occ_e` (boundary), `_occ_poc` (O-PR, the O-ODS
/ OIS / AP), `_occ_aoc` (orientation accuracy) and `_occ_o` (DOC's
original O-PR); boundary-only runs write `<app>` = "".  The validity-aware
RealOOB curve, when it is the headline, is added as `_occ_valid_poc`.

The per-image best F of the img table is `findBestRPF`-style (interpolated),
while OIS uses each image's first argmax over the thresholds, not
interpolated, exactly as `collect_eval_bdry_v2.m`.
"""

import os

import numpy as np

from relations import io_util
from relations.occlusion.metrics import aggregate
from relations.occlusion.metrics import image_eval

# doobscripts suffix -> our curve name (image_eval.CURVES).
OCC_CURVES = {"e": "boundary", "poc": "poc", "aoc": "aoc", "o": "o"}


def _g(x):
  return "%10g" % x


def tables(thresholds, cnt_r, sum_r, cnt_p, sum_p):
  """The three tables of one curve, as text.

  Args:
    thresholds: [K].
    cnt_r, sum_r, cnt_p, sum_p: [N, K] per-image counts of the curve.

  Returns:
    dict "eval_bdry", "eval_bdry_thr", "eval_bdry_img" -> file text.
  """
  t = np.asarray(thresholds, np.float64)
  cnt_r, sum_r, cnt_p, sum_p = (
    np.atleast_2d(np.asarray(a, np.float64)) for a in (cnt_r, sum_r, cnt_p, sum_p)
  )
  img_rows = []
  for i in range(cnt_r.shape[0]):
    r, p, _ = aggregate.rpf(cnt_r[i], sum_r[i], cnt_p[i], sum_p[i])
    br, bp, bf, bt = aggregate.best_rpf(t, r, p)
    img_rows.append("%10d %s %s %s %s\n" % (i + 1, _g(bt), _g(br), _g(bp), _g(bf)))
  s = aggregate.summarize(t, cnt_r, sum_r, cnt_p, sum_p)
  r, p, f = (np.asarray(s[k]) for k in ("R", "P", "F"))
  _, first = np.unique(r, return_index=True)
  keep = first[::-1]  # R descending, as `indR(end:-1:1)`
  thr_rows = ["%s %s %s %s\n" % (_g(t[k]), _g(r[k]), _g(p[k]), _g(f[k])) for k in keep]
  head = (s["ODS_T"], s["ODS_R"], s["ODS_P"], s["ODS"], s["OIS_R"], s["OIS_P"], s["OIS"], s["AP"])
  return {
    "eval_bdry": " ".join(_g(x) for x in head) + "\n",
    "eval_bdry_thr": "".join(thr_rows),
    "eval_bdry_img": "".join(img_rows),
  }


def write(outdir, summary, with_orientation=True):
  """Writes doobscripts' tables of an evaluation next to its JSON.

  Args:
    outdir: directory (created).
    summary: an `api.evaluate_arrays` / `gt_readers.evaluate_dir` result
      (uses "per_image", "thresholds" and "o_curve").
    with_orientation: write the `_occ_*` set (else the boundary tables).

  Returns:
    list of the paths written (each atomically).
  """
  per_image = summary["per_image"]
  stack = {k: np.stack([c[k] for c in per_image]) for k in image_eval.COUNT_KEYS}
  thr = summary["thresholds"]
  if with_orientation:
    names = {f"_occ_{k}": v for k, v in OCC_CURVES.items()}
    if summary.get("o_curve") == "valid_poc":
      names["_occ_valid_poc"] = "valid_poc"
  else:
    names = {"": "boundary"}
  os.makedirs(outdir, exist_ok=True)
  written = []
  for app, curve in names.items():
    keys = image_eval.CURVES[curve]
    texts = tables(thr, *(stack[k] for k in keys))
    for stem, text in texts.items():
      path = os.path.join(outdir, f"{stem}{app}.txt")
      with io_util.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="ascii") as f:
          f.write(text)
      written.append(path)
  return written


def _rows(path, ncol):
  try:
    with open(path, encoding="ascii") as f:
      rows = [line.split() for line in f if line.strip()]
  except OSError as e:
    raise ValueError(f"{path}: cannot read ({e})") from e
  for n, row in enumerate(rows, 1):
    if len(row) != ncol:
      raise ValueError(f"{path}: line {n} has {len(row)} columns, expected {ncol}")
  try:
    return np.asarray(rows, np.float64).reshape(-1, ncol)
  except ValueError as e:
    raise ValueError(f"{path}: not a numeric table ({e})") from e


def read(directory, append):
  """Reads one curve's tables written by doobscripts (or by `write`).

  Returns:
    dict "summary" float64 [8] (ODS T R P F, OIS R P F, AP), "thr"
    [n, 4] (T R P F) and "img" [N, 5] (index T R P F).
  """
  j = lambda stem: os.path.join(directory, f"{stem}{append}.txt")
  return {
    "summary": _rows(j("eval_bdry"), 8)[0],
    "thr": _rows(j("eval_bdry_thr"), 4),
    "img": _rows(j("eval_bdry_img"), 5),
  }


def ods_ap_from_thr(thr):
  """ODS (T, R, P, F) and AP recomputed from a thr table by our aggregation.

  The table holds one row per distinct recall.  AP uses only those rows
  anyway, so it is always the table's AP.  The ODS search runs over the
  kept rows sorted by threshold: the full curve's ODS when no row was
  dropped or only repeats of the last recall (as in DOOBNet's tables, whose
  dropped rows all have R = P = 0); a dropped interior repeat removes that
  row's interpolation segment.

  Returns:
    dict ODS, ODS_T, ODS_R, ODS_P, AP.
  """
  thr = np.asarray(thr, np.float64)
  thr = thr[np.argsort(thr[:, 0], kind="stable")]
  r, p, f, t = aggregate.best_rpf(thr[:, 0], thr[:, 1], thr[:, 2])
  return {
    "ODS": f,
    "ODS_T": t,
    "ODS_R": r,
    "ODS_P": p,
    "AP": aggregate.average_precision(thr[:, 1], thr[:, 2]),
  }
