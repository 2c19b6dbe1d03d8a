"""`python -m relations.evaluate occlusion --gt DIR --pred DIR [...]`.

Reads GT in the RealOOB layout (relations/occlusion/data/realoob_io.py), or the
official PIOD (`bndinfo_pascal`) / BSDS-ownership (`gtStruct.gt_theta`)
.mat files through the builder's readers (`--gt-format`, detected when
unambiguous; relations/occlusion/metrics/gt_readers.py), prints the
paper's Table 3 columns (B-ODS B-OIS B-AP AC O-ODS O-OIS O-AP), writes JSON
with those keys (fractions) plus all curves, and draws the PR curves to PNG.
Predictions use the project's prediction layout (boundaries/, orientation/)
or another tool's (`--pred-format`, pred_readers.py).  Next to the JSON the
doobscripts tables `eval_bdry*.txt` are written (doob_tables.py).  Without
orientation (`--no-orientation`) the O-metrics are null in the JSON and "-"
in the table.  `--thresholds iobe` scores as IOBE's / TPENet's doobscripts
(only 0.51 ... 0.99).

Per-format defaults: realoob excludes a 2-pixel border and scores the
O-metrics on valid-orientation pixels (`valid_poc`); PIOD and BSDS
ownership, like doobscripts, exclude no border and score doobscripts' `_poc`
on every GT pixel.  `--border`, `--valid-only` / `--all-orientations`
override either.

`--matcher bsds` matches pixels with the BSDS `correspondPixels` C++ (through
pyEdgeEval, an optional extra) instead of the exact matcher: slower and
random, but what published tables used (relations/occlusion/README.md,
"Which matcher").  The JSON records the matcher.
"""

import os
import sys
import time

from relations import cli_errors
from relations import io_util
from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import realoob_io
from relations.occlusion.metrics import api
from relations.occlusion.metrics import bsds
from relations.occlusion.metrics import doob_tables
from relations.occlusion.metrics import gt_readers
from relations.occlusion.metrics import plots
from relations.occlusion.metrics import pred_readers

TABLE_COLUMNS = ("B-ODS", "B-OIS", "B-AP", "AC", "O-ODS", "O-OIS", "O-AP")


def _cell(value):
  return f"{'-':>8}" if value is None else f"{value:>8.3f}"


def format_table(summary, name="prediction"):
  """Table 3 layout: one header row, one row of 3-decimal fractions.

  A metric that was not evaluated (O-* without orientation: None) prints
  "-", as Table 3's boundary-only rows.
  """
  head = f"{'method':<20}" + "".join(f"{c:>8}" for c in TABLE_COLUMNS)
  row = f"{name[:20]:<20}" + "".join(_cell(summary[c]) for c in TABLE_COLUMNS)
  return head + "\n" + row


def _write_json(path, obj):
  io_util.write_json_atomic(path, obj, indent=1)


def build_parser():
  p = cli_errors.ArgumentParser(
    prog="python -m relations.evaluate occlusion",
    description="Oriented occlusion-boundary evaluation (B-/O- ODS, OIS, "
    "AP and AC) without MATLAB.",
  )
  p.add_argument(
    "--gt",
    required=True,
    type=cli_errors.existing_dir,
    help="GT root: RealOOB layout, PIOD root (Data/, "
    "val_doc_2010.txt), BSDS-ownership root (testfg/, "
    "trainfg/), or a folder of PIOD / BSDS-ownership .mat files",
  )
  p.add_argument(
    "--gt-format",
    default="auto",
    choices=("auto",) + gt_readers.FORMATS,
    help="GT format (default: detected from --gt; an error when ambiguous)",
  )
  p.add_argument("--pred", required=True, type=cli_errors.existing_dir, help="prediction root")
  p.add_argument(
    "--pred-format",
    default="ours",
    choices=pred_readers.PRED_FORMATS,
    help="ours: boundaries/, orientation/ uint16 PNGs (default); doob_mat: <id>.mat with "
    "edge_ori.edge/.ori (DOOBNet, OFNet, P2ORM <id>_lab_v_g.mat) or DOC's doc_edge/, "
    "doc_ori/; mtorl_png: <id>_boundary|_ob.png black on white, <id>_orientation|_oo.png "
    "x 2pi/255 (MT-ORL, IOBE); p2orm_png: <id>_lab_v_g.png /255, <id>_lab_v_g_ori.png "
    "/255 x 2pi - pi",
  )
  p.add_argument(
    "--thresholds",
    default="99",
    choices=api.THRESHOLD_SETS,
    help="99: 0.01 ... 0.99 (doobscripts, default); iobe: only 0.51 ... 0.99 scored, the "
    "rest zero, as IOBE's / TPENet's shipped doobscripts (needs --nthresh 99)",
  )
  p.add_argument(
    "--protocol",
    default="doob",
    choices=("doob", "seval"),
    help="doob: edge_nms once (default); seval: thin per threshold, no NMS",
  )
  p.add_argument(
    "--valid-only",
    dest="valid_only",
    action="store_true",
    default=None,
    help="O-metrics on valid-orientation GT (valid_poc; default for realoob)",
  )
  p.add_argument(
    "--all-orientations",
    dest="valid_only",
    action="store_false",
    help="O-metrics by doobscripts _poc "
    "on every GT pixel (ignore valid/; default for piod and "
    "bsds_ownership)",
  )
  p.add_argument(
    "--border",
    type=cli_errors.int_in(0, 10000),
    default=None,
    help="border exclusion in pixels (default: realoob 2, "
    "piod / bsds_ownership 0 as in doobscripts)",
  )
  p.add_argument(
    "--split",
    default=None,
    help="realoob: ids from splits/X.txt (default: every id); "
    "piod / bsds_ownership roots: test (default: "
    "val_doc_2010.txt / testfg) or train",
  )
  p.add_argument("--nthresh", type=cli_errors.int_in(1, 10000), default=99)
  p.add_argument(
    "--max-dist",
    type=cli_errors.float_in(0, 1, lo_open=True),
    default=0.0075,
    help="tolerance, fraction of the image diagonal",
  )
  p.add_argument(
    "--matcher",
    default="exact",
    choices=("exact", "bsds"),
    help="exact: maximum matching, deterministic (default); "
    "bsds: the BSDS correspondPixels C++ via pyEdgeEval, as "
    "published tables (random, a few pairs fewer, slower)",
  )
  p.add_argument(
    "--bsds-seed",
    type=int,
    default=0,
    help="--matcher bsds: seed image i with N+i for a "
    "reproducible run (default 0: seeded from the clock, as "
    "BSDS)",
  )
  p.add_argument(
    "--no-orientation",
    action="store_true",
    help="predictions have no orientation/ (B-metrics only)",
  )
  p.add_argument("--output", default=None, type=cli_errors.output_file, help="metrics JSON path")
  p.add_argument(
    "--plot",
    default=None,
    type=cli_errors.output_file,
    help="PR-curve PNG (default: next to --output)",
  )
  p.add_argument("--name", default=None, help="method name for the table")
  p.add_argument("--workers", type=cli_errors.int_in(1, 1024), default=None)
  return p


@cli_errors.entry_point
def main(argv=None):
  args = build_parser().parse_args(argv)
  t0 = time.time()
  if args.thresholds != "99" and args.nthresh != 99:
    print(f"error: --thresholds {args.thresholds} needs --nthresh 99", file=sys.stderr)
    return 2
  try:
    api.check_matcher(args.matcher, args.bsds_seed)
  except (ValueError, bsds.MatcherUnavailableError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  try:
    sources = realoob_io.read_sources(args.gt)  # read first: a bad file fails fast
    summary = gt_readers.evaluate_dir(
      args.gt,
      args.pred,
      gt_format=None if args.gt_format == "auto" else args.gt_format,
      protocol=args.protocol,
      valid_only=args.valid_only,
      border=args.border,
      split=args.split,
      nthresh=args.nthresh,
      max_dist=args.max_dist,
      with_orientation=not args.no_orientation,
      num_workers=args.workers,
      matcher=args.matcher,
      bsds_seed=args.bsds_seed,
      pred_format=args.pred_format,
      threshold_set=args.thresholds,
    )
  except (realoob_io.RealOOBFormatError, occlusion_formats.OcclusionFormatError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  name = args.name or os.path.basename(os.path.normpath(args.pred))
  print(format_table(summary, name))
  by_source = None
  if summary["gt_format"] == "realoob" and sources:  # optional sources.txt: a row per source
    by_source = api.per_source(summary, sources)
    for src, m in by_source.items():
      print(format_table(m, f"  {src} ({m['num_images']})").splitlines()[1])
  print(
    f"({summary['num_images']} images, gt={summary['gt_format']}, "
    f"protocol={args.protocol}, matcher={args.matcher}, "
    f"pred={args.pred_format}, thresholds={args.thresholds}, "
    f"O-curve={summary['o_curve']}, "
    f"border={summary['border']}px, "
    f"{time.time() - t0:.1f}s)"
  )
  result = {k: summary[k] for k in api.HEADLINE}
  result.update(
    gt_format=summary["gt_format"],
    protocol=args.protocol,
    matcher=args.matcher,
    bsds_seed=args.bsds_seed,
    pred_format=args.pred_format,
    threshold_set=args.thresholds,
    o_curve=summary["o_curve"],
    border=summary["border"],
    max_dist=args.max_dist,
    num_images=summary["num_images"],
    ids=summary["ids"],
    thresholds=summary["thresholds"],
    curves=summary["curves"],
  )
  if by_source is not None:
    result["per_source"] = by_source
  plot = args.plot
  if args.output:
    _write_json(args.output, result)
    print(f"wrote {args.output}")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    tables = doob_tables.write(out_dir, summary, with_orientation=not args.no_orientation)
    print(f"wrote {len(tables)} doobscripts tables (eval_bdry*.txt) to {out_dir}")
    if plot is None:
      plot = os.path.splitext(args.output)[0] + "_pr.png"
  if plot:
    plots.plot_pr_curves(summary, plot, title=name)
    print(f"wrote {plot}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
