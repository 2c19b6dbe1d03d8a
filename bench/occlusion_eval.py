"""Benchmark: our occlusion evaluator vs pyEdgeEval's BSDS matcher.

Synthetic 1024x768 GT/prediction pairs (RealOOB's test split has 130 images
at this size).  Ours: the full suite (edge_nms, exact matching at 99
thresholds, B- and O- counts, AC) on all images with one thread per core.
Reference: the same counts with pyEdgeEval 0.2.8's `correspond_pixels` at
every threshold (doobscripts `EvaluateSingle`, fastmode 0), one process per
core on a subset, scaled per image (it takes minutes per image).  Prints
both times, the ratio and the metric differences on the common subset.

  python bench/occlusion_eval.py --num-images 130 --ref-images 2
"""

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from relations.occlusion.metrics import api# pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import image_eval# pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import nms# pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import reference# pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import synthetic# pylint: disable=g-import-not-at-top,wrong-import-position


def make_sample(seed, height, width):
  rng = np.random.default_rng(seed)
  gt = synthetic.make_scene(rng, height, width, num_shapes=16)
  prob, theta = synthetic.make_prediction(rng, gt, quality=0.8, noise=0.3)
  return dict(prob=prob, theta_pred=theta, gts=[gt["boundaries"]],
              theta_gts=[gt["orientation"]], valids=[gt["valid"]])


def _ref_one(args):
  seed, height, width = args
  s = make_sample(seed, height, width)
  t = time.time()
  c = reference.reference_counts(s["prob"], s["gts"], s["theta_pred"],
                                 s["theta_gts"], s["valids"], border=2)
  c["crispness"] = nms.crispness(s["prob"])
  return c, time.time() - t


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--num-images", type=int, default=130)
  ap.add_argument("--ref-images", type=int, default=2)
  ap.add_argument("--height", type=int, default=768)
  ap.add_argument("--width", type=int, default=1024)
  ap.add_argument("--cores", type=int, default=os.cpu_count())
  args = ap.parse_args()
  hw = (args.height, args.width)

  # Warm the numba caches so compile time is not billed to the run.
  api.evaluate_arrays([make_sample(0, 64, 80)], border=2, num_workers=1)
  t = time.time()
  samples = [make_sample(s, *hw) for s in range(args.num_images)]
  t_gen = time.time() - t
  npix = [int(s["gts"][0].sum()) for s in samples]
  t = time.time()
  ours = api.evaluate_arrays(samples, border=2, valid_only=True,
                             num_workers=args.cores)
  t_ours = time.time() - t
  print(f"images: {args.num_images} at {args.width}x{args.height}, "
        f"{np.mean(npix):.0f} GT px/image (generation {t_gen:.1f}s, not "
        "timed)")
  print(f"ours: {t_ours:.1f}s on {args.cores} cores = "
        f"{t_ours / args.num_images:.3f} s/image "
        f"({args.num_images / t_ours:.2f} images/s)")

  nref = min(args.ref_images, args.num_images)
  t = time.time()
  with multiprocessing.get_context("spawn").Pool(min(args.cores,
                                                     nref)) as pool:
    res = pool.map(_ref_one, [(s, *hw) for s in range(nref)])
  t_ref_wall = time.time() - t
  ref_counts = [r[0] for r in res]
  per_img = float(np.mean([r[1] for r in res]))
  ref_scaled = per_img * args.num_images / args.cores
  print(f"pyEdgeEval matcher: {nref} images in {t_ref_wall:.1f}s wall "
        f"({per_img:.1f} s/image/core); scaled to {args.num_images} images "
        f"on {args.cores} cores: {ref_scaled:.0f}s")
  ours_rate = t_ours / args.num_images
  print(f"ratio (reference / ours, per image at equal cores): "
        f"{ref_scaled / t_ours:.1f}x")
  del ours_rate
  a = api.summarize_counts(ours["per_image"][:nref], valid_only=True)
  b = api.summarize_counts(ref_counts, valid_only=True)
  print("metric  ours     ref      diff   (on the reference subset)")
  for k in api.HEADLINE:
    print(f"{k:<6} {a[k]:.5f}  {b[k]:.5f}  {a[k] - b[k]:+.5f}")
  for name in image_eval.CURVES:
    ca, cb = a["curves"][name], b["curves"][name]
    print(f"  {name:<10} dODS {ca['ODS'] - cb['ODS']:+.5f} "
          f"dOIS {ca['OIS'] - cb['OIS']:+.5f} dAP {ca['AP'] - cb['AP']:+.5f}")
  print("all images (ours): " + " ".join(
      f"{k}={ours[k]:.4f}" for k in api.HEADLINE))


if __name__ == "__main__":
  main()
