"""`python -m relations.evaluate depth --gt DIR --depth DIR [...]`.

Depth probes of RealOOB §4.3 (relations/occlusion/metrics/depth_probes.py
documents every parameter).  GT: RealOOB layout (boundaries/, orientation/,
valid/).  Predicted depth: `<DIR>/depth/<id>.png` (uint16 mm, 0 = missing,
the layout's depth encoding) or `<DIR>/<id>.npy` (float [H, W], any positive
scale).  `--inverse` marks disparity-like maps (larger = nearer).

`--upsample bilinear` resizes a prediction of another size to the GT's, as
the paper does ("bilinearly upsampled to input resolution when needed";
half-pixel centres, PyTorch `interpolate(align_corners=False)` / OpenCV
`INTER_LINEAR`); a pixel whose bilinear footprint touches a missing (0)
value stays missing.  Without it a size mismatch is an error.
`--gt-depth-only` scores only images with a GT depth map
(`depth/<id>.png` in the GT root): the paper's N = 209 subset, used because
MoGe-2 and PPD helped label the rest.
"""

import os
import sys

import cv2
import numpy as np

from relations import cli_errors, io_util
from relations.occlusion.data import realoob_io
from relations.occlusion.metrics import depth_probes

TABLE4 = ("R", "F1", "dbe_acc", "dbe_com", "F1_w", "R_w", "B-ODS", "B-OIS", "B-AP")
TABLE5 = ("O-ODS", "O-OIS", "O-AP", "coverage", "d_ord_cond", "d_ord_joint")
PROTOCOLS = ("i", "ii", "iii", "iv", "v")


def _depth_path(root, image_id):
  for p in (
    realoob_io.field_path(root, realoob_io.DEPTH, image_id),
    os.path.join(root, f"{image_id}.npy"),
  ):
    if os.path.isfile(p):
      return p
  return None


def read_pred_depth(path, inverse=False):
  """Reads a predicted depth map (PNG mm or .npy); returns float64 [H, W].

  Raises:
    RealOOBFormatError: an unreadable file, a map that is not 2-D numbers, a non-finite or
      negative value, or a map with no valid (> 0) pixel; each names the file.
  """
  if path.endswith(".npy"):
    try:
      d = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
      raise realoob_io.RealOOBFormatError(
        f"{path}: not a readable .npy array ({e}); expected float [H, W] depth"
      ) from None
    if d.dtype.kind not in "fiu":
      raise realoob_io.RealOOBFormatError(f"{path}: depth must be numbers, got dtype {d.dtype}")
    d = d.astype(np.float64)
    if d.ndim != 2:
      raise realoob_io.RealOOBFormatError(f"{path}: depth must be 2-D, got shape {d.shape}")
  else:
    d = realoob_io.read_depth(path).astype(np.float64)
  bad = int(np.count_nonzero(~np.isfinite(d)))
  if bad:
    raise realoob_io.RealOOBFormatError(
      f"{path}: {bad} non-finite depth values (NaN / inf); expected finite depth, 0 = missing"
    )
  neg = int(np.count_nonzero(d < 0))
  if neg:
    raise realoob_io.RealOOBFormatError(
      f"{path}: {neg} negative depth values (min {d.min():g}); expected depth >= 0, 0 = missing"
    )
  if not np.any(d > 0):
    raise realoob_io.RealOOBFormatError(f"{path}: every pixel is 0 (missing); no depth to score")
  if inverse:
    d = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
  return d


def upsample_bilinear(depth, shape):
  """Bilinear resize of a depth map to `shape` (H, W), keeping 0 = missing.

  Args:
    depth: float [h, w], 0 = missing.
    shape: (H, W) target.

  Returns:
    float64 [H, W]: bilinear depth (half-pixel centres); 0 where any of the
    (up to four) source pixels weighted into it is missing.
  """
  d = np.asarray(depth, np.float64)
  size = (int(shape[1]), int(shape[0]))
  up = cv2.resize(d, size, interpolation=cv2.INTER_LINEAR)
  ok = cv2.resize((d > 0).astype(np.float64), size, interpolation=cv2.INTER_LINEAR)
  return np.where(ok >= 1.0 - 1e-9, up, 0.0)


def format_tables(m):
  lines = []
  for name, cols in (("Table 4", TABLE4), ("Table 5", TABLE5)):
    lines.append(f"{name}: " + "".join(f"{c:>12}" for c in cols))
    lines.append(" " * 9 + "".join(f"{m[c]:>12.3f}" if c in m else f"{'-':>12}" for c in cols))
  return "\n".join(lines)


@cli_errors.entry_point
def main(argv=None):
  p = cli_errors.ArgumentParser(prog="python -m relations.evaluate depth")
  p.add_argument(
    "--gt", required=True, type=cli_errors.existing_dir, help="GT root in the RealOOB layout"
  )
  p.add_argument(
    "--depth",
    required=True,
    type=cli_errors.existing_dir,
    help="predicted depth: DIR/depth/<id>.png or DIR/<id>.npy",
  )
  p.add_argument("--split", default=None)
  p.add_argument("--inverse", action="store_true")
  p.add_argument(
    "--protocols",
    default=PROTOCOLS,
    type=cli_errors.names(PROTOCOLS),
    help="comma-separated subset of " + ",".join(PROTOCOLS),
  )
  p.add_argument(
    "--upsample",
    default="none",
    choices=("none", "bilinear"),
    help="bilinear: resize predictions of another size to the GT (as the paper); "
    "none: a size mismatch is an error (default)",
  )
  p.add_argument(
    "--gt-depth-only",
    action="store_true",
    help="only images with GT depth (GT depth/<id>.png; the paper's N = 209 subset)",
  )
  p.add_argument("--output", default=None, type=cli_errors.output_file)
  args = p.parse_args(argv)
  try:
    ids = realoob_io.read_split(args.gt, args.split) if args.split else realoob_io.list_ids(args.gt)
    if args.gt_depth_only:
      n_all = len(ids)
      ids = [i for i in ids if os.path.isfile(realoob_io.field_path(args.gt, realoob_io.DEPTH, i))]
      if not ids:
        raise realoob_io.RealOOBFormatError(
          f"{args.gt}: --gt-depth-only, but none of the {n_all} images has "
          f"{realoob_io.field_path(args.gt, realoob_io.DEPTH, '<id>')}"
        )
      print(f"GT-depth subset: {len(ids)} of {n_all} images")
    problems = []
    paths = {}
    for i in ids:
      dp = _depth_path(args.depth, i)
      if dp is None:
        problems.append(
          f"{i}: missing {realoob_io.field_path(args.depth, 'depth', i)} "
          f"(or {os.path.join(args.depth, i + '.npy')})"
        )
      else:
        paths[i] = dp
      for f in (realoob_io.BOUNDARIES, realoob_io.ORIENTATION, realoob_io.VALID):
        fp = realoob_io.field_path(args.gt, f, i)
        if not os.path.isfile(fp):
          problems.append(f"{i}: missing {fp}")
    if problems:
      raise realoob_io.RealOOBFormatError(
        f"{len(problems)} problem(s) with the inputs:\n  " + "\n  ".join(problems)
      )
    samples = []
    for i in ids:
      g = realoob_io.read_gt(args.gt, i)
      d = read_pred_depth(paths[i], args.inverse)
      if d.shape != g["boundaries"].shape:
        if args.upsample != "bilinear":
          raise realoob_io.RealOOBFormatError(
            f"{i}: {paths[i]} has shape {d.shape}, GT has "
            f"{g['boundaries'].shape} (pass --upsample bilinear to resize it, as the paper)"
          )
        d = upsample_bilinear(d, g["boundaries"].shape)
      samples.append(dict(depth=d, **g))
  except realoob_io.RealOOBFormatError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  m = depth_probes.evaluate_depth(samples, tuple(args.protocols))
  print(format_tables(m))
  print(f"({len(samples)} images)")
  if args.output:
    io_util.write_json_atomic(
      args.output,
      dict(
        m,
        num_images=len(samples),
        ids=ids,
        upsample=args.upsample,
        gt_depth_only=args.gt_depth_only,
      ),
      indent=1,
    )
    print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
