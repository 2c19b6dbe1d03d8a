"""`python -m relations.occlusion.stats`: RealOOB Table 2 statistics of a built dataset.

  python -m relations.occlusion.stats --data_dir ~/tensorflow_datasets --config realoob \
      [--splits train,test] [--output stats.json]

Reads the prepared TFDS `occlusion_boundaries/<config>` dataset (any of
realoob, piod, bsds_ownership; build it first with `relations.datasets.prepare`)
and prints, over the benchmark images of the splits (hard negatives excluded,
as the paper's statistics exclude the auxiliary resources):

  images            number of images
  OB pixels         total OB pixels (annotator 1)
  OB / image        OB pixels per image (RealOOB: 8.20 K)
  density           OB pixels / image pixels (1.10 %)
  OB / Canny        OB pixels / Canny edge pixels (12.7 %)
  near Canny        share of OB pixels within 2 px of a Canny edge (91.7 %)
  valid orientation share of OB pixels with a valid orientation (63.9 %)

Canny: `cv2.Canny` on the grey image with thresholds 50 / 100 (the demo's
baseline; `--canny_low/--canny_high`); the paper does not state its
parameters, so OB / Canny and near-Canny depend on them.  Multi-annotator
sets (BSDS ownership) use annotator 1.  `--border` pixels at the image edge
are excluded from the Canny counts (default: 2 for realoob, whose GT has
no OB there, else 0).
"""

import sys

import cv2
import numpy as np

from relations import cli_errors
from relations import io_util

COLUMNS = (
  "images",
  "OB pixels",
  "OB / image",
  "density",
  "OB / Canny",
  "near Canny",
  "valid orientation",
)


def image_stats(image, boundaries, valid, canny=(50, 100), border=0, near_px=2.0):
  """Counts of one image.

  Args:
    image: uint8 [H, W, 3] RGB.
    boundaries, valid: bool [H, W] (annotator 1).
    canny: (low, high) thresholds of `cv2.Canny`.
    border: pixels at the image edge left out of the Canny map.
    near_px: distance (Euclidean, pixels) for "near Canny".

  Returns:
    dict of int counts: pixels, ob, valid, canny, ob_near_canny.
  """
  gray = cv2.cvtColor(np.ascontiguousarray(image, np.uint8), cv2.COLOR_RGB2GRAY)
  edges = cv2.Canny(gray, canny[0], canny[1]) > 0
  if border > 0:
    inside = np.zeros(edges.shape, bool)
    inside[border:-border, border:-border] = True
    edges &= inside
  b = np.asarray(boundaries, bool)
  if edges.any():
    # Distance of every pixel to the nearest Canny pixel.
    dist = cv2.distanceTransform((~edges).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    near = int((b & (dist <= near_px)).sum())
  else:
    near = 0
  return {
    "pixels": int(b.size),
    "ob": int(b.sum()),
    "valid": int((b & np.asarray(valid, bool)).sum()),
    "canny": int(edges.sum()),
    "ob_near_canny": near,
  }


def summarize(per_image):
  """Table 2 row (fractions, not percents) from `image_stats` dicts."""
  tot = {
    k: sum(c[k] for c in per_image) for k in ("pixels", "ob", "valid", "canny", "ob_near_canny")
  }
  n = len(per_image)
  ratio = lambda a, b: a / b if b else float("nan")
  return {
    "images": n,
    "OB pixels": tot["ob"],
    "OB / image": ratio(tot["ob"], n),
    "density": ratio(tot["ob"], tot["pixels"]),
    "OB / Canny": ratio(tot["ob"], tot["canny"]),
    "near Canny": ratio(tot["ob_near_canny"], tot["ob"]),
    "valid orientation": ratio(tot["valid"], tot["ob"]),
  }


def dataset_stats(source_by_split, canny=(50, 100), border=0):
  """Table 2 row over random-access sources (builder splits)."""
  per_image = []
  for src in source_by_split:
    for i in range(len(src)):
      ex = src[i]
      if bool(ex["hard_negative"]):
        continue
      per_image.append(
        image_stats(
          np.asarray(ex["image"]),
          np.asarray(ex["boundaries"])[0],
          np.asarray(ex["valid"])[0],
          canny,
          border,
        )
      )
  if not per_image:
    raise ValueError("no benchmark images (only hard negatives?)")
  return summarize(per_image)


def format_row(row):
  head = "".join(f"{c:>18}" for c in COLUMNS)
  cells = []
  for c in COLUMNS:
    v = row[c]
    if c in ("images", "OB pixels"):
      cells.append(f"{v:>18,d}")
    elif c == "OB / image":
      cells.append(f"{v / 1000:>17.2f}K")
    else:
      cells.append(f"{100 * v:>17.2f}%")
  return head + "\n" + "".join(cells)


@cli_errors.entry_point
def main(argv=None):
  p = cli_errors.ArgumentParser(
    prog="python -m relations.occlusion.stats", description=__doc__.strip().splitlines()[0]
  )
  p.add_argument("--data_dir", required=True, help="TFDS data directory with the prepared dataset")
  p.add_argument("--config", default="realoob", choices=("realoob", "piod", "bsds_ownership"))
  p.add_argument("--splits", default="train,test", help="comma-separated splits")
  p.add_argument("--canny_low", type=int, default=50)
  p.add_argument("--canny_high", type=int, default=100)
  p.add_argument("--border", type=int, default=None, help="default: 2 for realoob, else 0")
  p.add_argument("--output", default=None, type=cli_errors.output_file)
  args = p.parse_args(argv)
  from relations import tfds_util  # pylint: disable=g-import-not-at-top
  from relations.occlusion.data import occlusion_boundaries  # pylint: disable=g-import-not-at-top

  builder = tfds_util.ensure_built(
    occlusion_boundaries.Builder, args.data_dir, None, config=args.config
  )
  splits = [s for s in args.splits.split(",") if s]
  unknown = [s for s in splits if s not in builder.info.splits]
  if unknown:
    raise cli_errors.InputError(
      f"unknown split(s) {unknown}; the dataset has {list(builder.info.splits)}"
    )
  border = (2 if args.config == "realoob" else 0) if args.border is None else args.border
  row = dataset_stats(
    [builder.as_data_source(s) for s in splits], (args.canny_low, args.canny_high), border
  )
  print(f"occlusion_boundaries/{args.config} ({'+'.join(splits)}):")
  print(format_row(row))
  if args.output:
    io_util.write_json_atomic(
      args.output, dict(row, config=args.config, splits=splits, border=border), indent=1
    )
    print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
