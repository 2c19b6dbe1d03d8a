"""Speed of our VidVRD evaluator vs the official one, on a VidOR-val-sized case.

  python bench/video_relations_eval.py --official /tmp/ref/xdshang \
      [--official-vru20 /tmp/ref/next] [--videos 832] [--seed 0]

The case (deterministic from --seed), sized like VidOR validation:
  - 832 videos of 300-1000 frames (1920x1080), 3-7 objects each moving with
    smooth random motion (integer boxes, like the annotations);
  - 20-52 GT relation instances per video (~36 on average, as VidOR val's
    30,142 / 832), triplets drawn from a few predicates per video, durations
    15-1000 frames (log-uniform, clipped to the objects' overlap);
  - 200 predictions per video with float boxes (as a model writes them): half
    are detections of a GT instance (its triplet 80% of the time, duration
    and boxes perturbed), half random pairs of the video's objects with a
    random predicate of the video (many share a GT triplet but are placed
    elsewhere in time: the expensive case for the scorer).
Timed, each as wall and CPU (process) time, in one run:
  official  the official `evaluate()` on the dicts (JSON parsing excluded);
  dicts     our `scoring.evaluate` on the same dicts, cold (first call in the
            process: numba compile or cache load) and warm;
  arrays    our array path as a model uses it: the predictions exist as
            float64 box arrays (`association.Relation`-like objects, which is
            what our model emits before any JSON), `RelationTable.
            from_relations` + `scoring.evaluate_tables`, with the GT table
            built once beforehand (its conversion is printed separately:
            a training run scores against the same GT many times).
  json      (--json-videos N, default 100) end to end from files, for the
            first N videos: the GT JSON and a submission written as our
            model writes it (`relations.video_relations.submission`, boxes rounded to
            --json-digits decimals; -1 = full precision, Python repr), then
            official = json.load of both + evaluate(), ours =
            `fastjson.read_table` of both + `evaluate_tables`. (All 832
            videos would be a ~2.5 GB file and ~13 GB of Python objects for
            json.load on this machine.)
The official output lines must equal ours to the last digit for every
path; the script prints the times and ratios, and exits non-zero on a
mismatch.
"""

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_relations_official as vrd_official  # pylint: disable=g-import-not-at-top
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import scoring
from relations.video_relations import association
from relations.video_relations import submission

WIDTH, HEIGHT = 1920, 1080
CATEGORIES = ("adult", "child", "baby", "dog", "cat", "ball/sports_ball",
              "car", "bicycle", "chair", "table", "toy", "horse")
PREDICATES = vrd_categories.VIDOR_PREDICATES


def _track(rng, length):
  """Per-frame integer boxes of one object moving smoothly over the video."""
  w = rng.randint(40, 600)
  h = rng.randint(40, 600)
  x = rng.uniform(0, WIDTH - w)
  y = rng.uniform(0, HEIGHT - h)
  vx, vy = rng.uniform(-3, 3), rng.uniform(-3, 3)
  boxes = []
  for _ in range(length):
    vx = max(-6., min(6., vx + rng.gauss(0, 0.3)))
    vy = max(-6., min(6., vy + rng.gauss(0, 0.3)))
    x = min(max(0., x + vx), WIDTH - w)
    y = min(max(0., y + vy), HEIGHT - h)
    boxes.append([int(x), int(y), int(x) + w, int(y) + h])
  return boxes


def _noisy(rng, boxes, sigma):
  """Float copy of a track, as a detector/tracker would report it."""
  dx, dy = rng.gauss(0, sigma), rng.gauss(0, sigma)
  return [[b[0] + dx + rng.gauss(0, 2), b[1] + dy + rng.gauss(0, 2),
           b[2] + dx + rng.gauss(0, 2), b[3] + dy + rng.gauss(0, 2)]
          for b in boxes]


def _span(rng, lo, hi):
  """A duration inside [lo, hi): log-uniform length in [15, 1000]."""
  avail = hi - lo
  n = int(math.exp(rng.uniform(math.log(15), math.log(1000))))
  n = max(1, min(n, avail))
  s = rng.randint(lo, hi - n)
  return s, s + n


def build_case(num_videos=832, preds_per_video=200, seed=0):
  """Returns (groundtruth, prediction, arrays).

  groundtruth and prediction are dicts in the official formats; arrays holds
  the same predictions as a model does, `{video_id: [association.Relation]}` with float64
  box arrays (views of one array per object track, equal to the lists).
  """
  rng = random.Random(seed)
  gt, pred, arrays = {}, {}, {}
  for v in range(num_videos):
    vid = str(2400000000 + v * 7919)
    length = rng.randint(300, 1000)
    nobj = rng.randint(3, 7)
    cats = [rng.choice(CATEGORIES) for _ in range(nobj)]
    tracks = [_track(rng, length) for _ in range(nobj)]
    noisy = [_noisy(rng, t, 6.0) for t in tracks]
    noisy_arr = [np.asarray(t, np.float64) for t in noisy]
    video_preds = rng.sample(PREDICATES[:12], 4) + rng.sample(PREDICATES, 2)
    rels = []
    for _ in range(rng.randint(20, 52)):
      a, b = rng.sample(range(nobj), 2)
      s, e = _span(rng, 0, length)
      rels.append({"triplet": (cats[a], rng.choice(video_preds), cats[b]),
                   "subject_tid": a, "object_tid": b, "duration": (s, e),
                   "sub_traj": tracks[a][s:e], "obj_traj": tracks[b][s:e],
                   "_ab": (a, b)})
    preds, rels_arr = [], []
    for k in range(preds_per_video):
      if k % 2 == 0:
        r = rng.choice(rels)
        a, b = r["_ab"]
        s, e = r["duration"]
        d = max(1, (e - s) // 10)
        s = max(0, s + rng.randint(-d, d))
        e = min(length, max(s + 1, e + rng.randint(-d, d)))
        t = r["triplet"] if rng.random() < 0.8 else (
            cats[a], rng.choice(video_preds), cats[b])
      else:
        a, b = rng.sample(range(nobj), 2)
        s, e = _span(rng, 0, length)
        t = (cats[a], rng.choice(video_preds), cats[b])
      score = rng.random()
      preds.append({"triplet": list(t), "score": score,
                    "duration": [s, e], "sub_traj": noisy[a][s:e],
                    "obj_traj": noisy[b][s:e]})
      rels_arr.append(association.Relation(
          tuple(t), s, e, noisy_arr[a][s:e], noisy_arr[b][s:e], [score]))
    for r in rels:
      del r["_ab"]
    gt[vid] = rels
    pred[vid] = preds
    arrays[vid] = rels_arr
  return gt, pred, arrays


def _clock():
  return time.perf_counter(), time.process_time()


def _since(t):
  return time.perf_counter() - t[0], time.process_time() - t[1]


def in_memory(gt, pred, arrays, runs):
  """Times official vs our dict path and array path on in-memory input."""
  t = _clock()
  gt_table = columns.RelationTable.from_dicts(gt)
  t_gt = _since(t)
  print(f"GT table (once per run): wall {t_gt[0]:.2f} s, CPU {t_gt[1]:.2f} s")
  ok = True
  for protocol, checkout in runs:
    mod = vrd_official.load(checkout, protocol)
    t = _clock()
    cold = scoring.evaluate(gt, pred, protocol)
    t_cold = _since(t)
    t = _clock()
    ours = scoring.evaluate(gt, pred, protocol)
    t_warm = _since(t)
    t = _clock()
    table = columns.RelationTable.from_relations(arrays)
    t_build = _since(t)
    t = _clock()
    tab = scoring.evaluate_tables(gt_table, table, protocol)
    t_tab = _since(t)
    del table
    t = _clock()
    status, res = vrd_official.run(mod, gt, pred, protocol)
    t_off = _since(t)
    if status != "ok":
      print(f"{protocol}: official code raised {res}")
      ok = False
      continue
    off_lines = vrd_official.printed_lines(res)
    equal = (off_lines == ours.official_lines() == cold.official_lines()
             == tab.official_lines())
    ok &= equal
    for i, what in enumerate(("wall", "CPU")):
      print(f"[{protocol}] {what:4s}: official {t_off[i]:6.2f} s | dicts "
            f"{t_cold[i]:5.2f} s cold, {t_warm[i]:5.2f} s warm -> "
            f"{t_off[i] / t_cold[i]:4.1f}x / {t_off[i] / t_warm[i]:4.1f}x | "
            f"arrays: evaluate_tables {t_tab[i]:5.3f} s -> "
            f"{t_off[i] / t_tab[i]:5.1f}x; + from_relations "
            f"{t_build[i]:5.2f} s -> {t_off[i] / (t_tab[i] + t_build[i]):4.1f}x")
    print(f"[{protocol}] numbers {'EQUAL' if equal else 'DIFFERENT'}:")
    for a, b, c in zip(off_lines, ours.official_lines(),
                       tab.official_lines()):
      print(f"    official {a}\n    dicts    {b}\n    arrays   {c}"
            if not a == b == c else f"    {a}")
  return ok


def json_end_to_end(gt, arrays, runs, num_videos, digits):
  """Times official json.load + evaluate vs our reader + evaluate_tables."""
  vids = list(gt)[:num_videos]
  ok = True
  with tempfile.TemporaryDirectory() as tmp:
    gt_path = os.path.join(tmp, "gt.json")
    sub_path = os.path.join(tmp, "submission.json")
    with open(gt_path, "w") as f:
      json.dump({v: gt[v] for v in vids}, f)
    with open(sub_path, "w") as f:
      if digits < 0:
        json.dump({"version": "VERSION 1.0", "results": {
            v: [{"triplet": list(r.triplet), "score": r.score,
                 "duration": [r.start, r.end], "sub_traj": r.sub_traj.tolist(),
                 "obj_traj": r.obj_traj.tolist()} for r in arrays[v]]
            for v in vids}}, f)
      else:
        json.dump({"version": "VERSION 1.0", "results": {
            v: [submission.relation_to_json(r, ndigits=digits)
                for r in arrays[v]] for v in vids}}, f)
    size = os.path.getsize(sub_path) / 2 ** 20
    print(f"[json] {len(vids)} videos: submission {size:.0f} MiB (boxes "
          f"{'full precision' if digits < 0 else f'{digits} decimals'}), "
          f"GT {os.path.getsize(gt_path) / 2 ** 20:.0f} MiB")
    for protocol, checkout in runs:
      mod = vrd_official.load(checkout, protocol)
      times = []
      for _ in range(2):     # cold (first call: numba compile / cache load)
        t = _clock()
        g = fastjson.read_table(gt_path, groundtruth=True)
        p = fastjson.read_table(sub_path)
        t_read = _since(t)
        ours = scoring.evaluate_tables(g, p, protocol)
        times.append((_since(t), t_read))
        del g, p
      t = _clock()
      with open(gt_path) as f:
        g = json.load(f)
      with open(sub_path) as f:
        p = json.load(f)["results"]
      t_load = _since(t)
      status, res = vrd_official.run(mod, g, p, protocol)
      t_off = _since(t)
      del g, p
      if status != "ok":
        print(f"[json] {protocol}: official code raised {res}")
        ok = False
        continue
      equal = vrd_official.printed_lines(res) == ours.official_lines()
      ok &= equal
      (cold, _), (warm, t_read) = times
      for i, what in enumerate(("wall", "CPU")):
        print(f"[json] [{protocol}] {what:4s}: official {t_off[i]:6.2f} s "
              f"(json.load {t_load[i]:6.2f} s) | ours {cold[i]:5.2f} s cold, "
              f"{warm[i]:5.2f} s warm (read {t_read[i]:5.2f} s) -> "
              f"{t_off[i] / cold[i]:4.1f}x / {t_off[i] / warm[i]:4.1f}x")
      print(f"[json] [{protocol}] numbers {'EQUAL' if equal else 'DIFFERENT'}"
            f": {ours.official_lines()[0]}")
  return ok


def _stats(gt, pred):
  n_gt = sum(map(len, gt.values()))
  n_pred = sum(map(len, pred.values()))
  boxes = sum(len(p["sub_traj"]) + len(p["obj_traj"])
              for ps in pred.values() for p in ps)
  pairs = 0
  for vid, rels in gt.items():
    count = {}
    for r in rels:
      count[tuple(r["triplet"])] = count.get(tuple(r["triplet"]), 0) + 1
    pairs += sum(count.get(tuple(p["triplet"]), 0) for p in pred[vid])
  return (f"{len(gt)} videos, {n_gt} GT relations, {n_pred} predictions "
          f"({boxes} predicted boxes), {pairs} same-triplet "
          "(prediction, GT) pairs")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--official", required=True,
                  help="checkout of xdshang/VidVRD-helper")
  ap.add_argument("--official-vru20",
                  help="checkout of NExTplusplus/VidVRD-helper (also times "
                  "the vru20 protocol)")
  ap.add_argument("--videos", type=int, default=832)
  ap.add_argument("--preds", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--json-videos", type=int, default=100,
                  help="videos of the end-to-end JSON timing (0: skip)")
  ap.add_argument("--json-digits", type=int, default=2,
                  help="decimals of the written boxes (-1: full precision)")
  ap.add_argument("--skip-memory", action="store_true",
                  help="skip the in-memory timings (only --json-videos)")
  args = ap.parse_args(argv)

  t0 = time.perf_counter()
  gt, pred, arrays = build_case(args.videos, args.preds, args.seed)
  print(f"case: {_stats(gt, pred)}; built in {time.perf_counter() - t0:.1f} s")
  runs = [("helper", args.official)]
  if args.official_vru20:
    runs.append(("vru20", args.official_vru20))
  ok = True
  if not args.skip_memory:
    ok &= in_memory(gt, pred, arrays, runs)
  if args.json_videos:
    ok &= json_end_to_end(gt, arrays, runs, args.json_videos,
                          args.json_digits)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
