"""Benchmark: the exact matcher vs the BSDS matcher (`--matcher bsds`).

Prints, per image size and predictor, the dataset-level B-/O- ODS, OIS and
AP of `matcher="exact"` and of several `matcher="bsds"` runs (mean, min,
max; run r seeds image i with 1000 r + 1 + i, so a rerun reproduces them),
the gap exact - mean(bsds), the BSDS spread max - min, and the time of each
run.  Everything else (edge_nms, thresholds, aggregation) is the same code.

Data: scenes rendered by relations/occlusion/data/synthetic.py (layered
textured surfaces, cast shadows, illumination gradients) with their GT
occlusion boundaries, orientation and validity.  Predictors:
  model  a realistic synthetic degradation of the GT standing in for a
         trained model (relations/occlusion/metrics/synthetic.py
         `make_prediction`, quality 0.8, noise 0.3: 20 % of the boundary
         missed in stretches, 1-px shift, blur, smooth background clutter,
         sparse false edges, angle noise, 15 % of objects' angles flipped);
  canny  the demo's Canny baseline (relations/occlusion/demo.py: binary
         cv2.Canny(gray, 50, 100) on the rendered image, uniformly random
         orientation), which also fires on texture and shadow edges.
Sizes: 1024x768 (RealOOB protocol: 2-px border, validity-aware O-curve) and
PIOD / BSDS sizes 500x375 and 481x321 (doobscripts: no border, `_poc`).

  python bench/occlusion_eval.py          # ~6 CPU-minutes (canny 1024x768
                                          # dominates); 2 processes

Times are printed as wall and as CPU seconds of the evaluating process (the
CPU figure is the one to compare on a shared machine).
  python bench/occlusion_eval.py --sizes 1024x768:4,500x375:8,481x321:8 \
      --bsds-runs 5 --procs 4
"""

import argparse
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from relations.occlusion.data import synthetic as scenes  # pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import api  # pylint: disable=g-import-not-at-top,wrong-import-position
from relations.occlusion.metrics import synthetic  # pylint: disable=g-import-not-at-top,wrong-import-position

METRICS = ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP")
PREDICTORS = ("model", "canny")


def parse_sizes(text):
  """'1024x768:1,481x321:2' -> [(width, height, count), ...]."""
  out = []
  for item in text.split(","):
    size, _, count = item.partition(":")
    w, h = size.lower().split("x")
    out.append((int(w), int(h), int(count or 1)))
  return out


def make_samples(predictor, width, height, count, seed=0):
  """`count` rendered scenes with GT and the `predictor`'s prediction."""
  import cv2  # pylint: disable=g-import-not-at-top

  samples = []
  for i in range(count):
    rng = np.random.default_rng([seed, width, height, i])
    sc = scenes.render_scene(rng, height, width)
    if predictor == "model":
      gt = {"boundaries": sc["boundaries"], "orientation": sc["orientation"], "labels": sc["obj"]}
      prob, theta = synthetic.make_prediction(rng, gt, quality=0.8, noise=0.3)
    else:
      gray = cv2.cvtColor(sc["image"], cv2.COLOR_RGB2GRAY)
      prob = (cv2.Canny(gray, 50, 100) > 0).astype(np.float32)
      theta = rng.uniform(-np.pi, np.pi, prob.shape).astype(np.float32)
    samples.append(
      {
        "prob": prob,
        "theta_pred": theta,
        "gts": [sc["boundaries"]],
        "theta_gts": [sc["orientation"]],
        "valids": [sc["valid"]],
      }
    )
  return samples


def protocol(width, height):
  """RealOOB settings at 1024x768, doobscripts' at PIOD / BSDS sizes."""
  realoob = (width, height) == (1024, 768)
  return {"border": 2 if realoob else 0, "valid_only": realoob}


def _warm():
  """Loads the numba caches and pyEdgeEval so no run is billed for them."""
  small = make_samples("model", 80, 64, 1)
  for matcher in ("exact", "bsds"):
    api.evaluate_arrays(small, nthresh=3, num_workers=1, matcher=matcher)


def run_one(job):
  """One (size, predictor, matcher, seed) evaluation.

  Returns:
    (metrics dict, (wall seconds, CPU seconds of this process)).
  """
  predictor, width, height, count, matcher, seed, nthresh = job
  samples = make_samples(predictor, width, height, count)
  t, c = time.perf_counter(), time.process_time()
  res = api.evaluate_arrays(
    samples,
    nthresh=nthresh,
    with_ac=False,
    num_workers=1,
    matcher=matcher,
    bsds_seed=seed,
    **protocol(width, height),
  )
  return ({k: res[k] for k in METRICS}, (time.perf_counter() - t, time.process_time() - c))


def _uptime():
  try:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  except OSError:
    return "uptime unavailable"


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument(
    "--sizes", default="1024x768:1,500x375:1,481x321:1", help="comma-separated WIDTHxHEIGHT:IMAGES"
  )
  ap.add_argument("--predictors", default=",".join(PREDICTORS))
  ap.add_argument("--bsds-runs", type=int, default=3)
  ap.add_argument("--nthresh", type=int, default=99)
  ap.add_argument(
    "--procs",
    type=int,
    default=min(2, os.cpu_count() or 1),
    help="processes; each evaluation runs on one core",
  )
  args = ap.parse_args()
  sizes = parse_sizes(args.sizes)
  predictors = args.predictors.split(",")
  print("load before:", _uptime())
  _warm()  # compiles the numba kernels into their on-disk cache once
  jobs = []
  # Smallest images first, so that an interrupted run still reports them.
  for w, h, n in sorted(sizes, key=lambda s: s[0] * s[1] * s[2]):
    for p in predictors:
      jobs.append((p, w, h, n, "exact", 0, args.nthresh))
      for r in range(args.bsds_runs):
        jobs.append((p, w, h, n, "bsds", 1000 * (r + 1) + 1, args.nthresh))
  t0 = time.perf_counter()
  # The BSDS matcher holds the GIL: processes, not threads.
  results = []
  with multiprocessing.get_context("spawn").Pool(args.procs, initializer=_warm) as pool:
    for job, (m, (t, c)) in zip(jobs, pool.imap(run_one, jobs, chunksize=1)):
      results.append((m, (t, c)))
      print(
        f"done {job[0]} {job[1]}x{job[2]}:{job[3]} {job[4]} seed "
        f"{job[5]}: "
        + " ".join(f"{k} {m[k]:.5f}" for k in METRICS)
        + f" ({t:.1f}s wall, {c:.1f}s CPU)",
        flush=True,
      )
  wall = time.perf_counter() - t0
  by_key = {}
  for job, res in zip(jobs, results):
    by_key.setdefault(job[:4], {}).setdefault(job[4], []).append(res)
  gaps = []
  for (p, w, h, n), runs in by_key.items():
    ((ex, (t_ex, c_ex)),) = runs["exact"]
    bs = np.array([[m[k] for k in METRICS] for m, _ in runs["bsds"]])
    t_bs = np.array([t for _, (t, _) in runs["bsds"]])
    c_bs = np.array([c for _, (_, c) in runs["bsds"]])
    pr = protocol(w, h)
    print(
      f"\n{p} at {w}x{h}, {n} image(s), border {pr['border']}, "
      f"O-curve {'valid_poc' if pr['valid_only'] else 'poc'}, "
      f"{args.nthresh} thresholds, {len(t_bs)} bsds runs"
    )
    print(f"{'metric':<7}{'exact':>9}{'bsds mean':>11}{'min':>9}{'max':>9}{'gap':>10}{'spread':>9}")
    for j, k in enumerate(METRICS):
      gap = ex[k] - bs[:, j].mean()
      print(
        f"{k:<7}{ex[k]:>9.5f}{bs[:, j].mean():>11.5f}"
        f"{bs[:, j].min():>9.5f}{bs[:, j].max():>9.5f}{gap:>+10.5f}"
        f"{bs[:, j].max() - bs[:, j].min():>9.5f}"
      )
    print(
      f"time   exact {t_ex:.1f}s wall, {c_ex:.1f}s CPU ({c_ex / n:.2f} "
      f"CPU s/image); bsds wall mean {t_bs.mean():.1f}s (min "
      f"{t_bs.min():.1f}, max {t_bs.max():.1f}), CPU mean {c_bs.mean():.1f}s "
      f"(min {c_bs.min():.1f}, max {c_bs.max():.1f}; "
      f"{c_bs.mean() / n:.1f} CPU s/image), CPU ratio "
      f"{c_bs.mean() / max(c_ex, 1e-9):.0f}x"
    )
    gaps.append([ex[k] - bs[:, j].mean() for j, k in enumerate(METRICS)])
  gaps = np.array(gaps)
  print(
    "\ngap exact - bsds mean over all rows: "
    + " ".join(
      f"{k} {gaps[:, j].min():+.4f}..{gaps[:, j].max():+.4f}" for j, k in enumerate(METRICS)
    )
  )
  print(f"wall {wall:.0f}s on {args.procs} processes")
  print("load after:", _uptime())


if __name__ == "__main__":
  main()
