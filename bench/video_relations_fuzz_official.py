"""Fuzzed equality check of our VidVRD evaluator against the official code.

  python bench/video_relations_fuzz_official.py --official /tmp/ref/xdshang \
      --official-vru20 /tmp/ref/next [--cases 300] [--seed 0] \
      [--record tests/video_relations/metrics/official_cases.json.xz]

Generates random small cases that concentrate on the awkward situations of
the official scorer: tied scores, duplicate predictions and duplicate GT, many GT of
one triplet, duration / box-count mismatches (including ones that make the
official code raise), empty GT videos, GT videos without predictions,
prediction-only videos, inverted boxes, float boxes, integer scores, videos
with more than 200 predictions (separating the protocols), zero-shot splits.
Every case is scored by both implementations in both protocols; per case we
compare the printed lines (to the last digit), the float values, and each
video's AP (the official code scored on that video alone), or that both
refuse. `--record` writes the cases with the official outputs (data only) for
the CI test `tests/video_relations/metrics/test_official_fixture.py`.
"""

import argparse
import json
import lzma
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_relations_official as vrd_official  # pylint: disable=g-import-not-at-top
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import kernels
from relations.video_relations.metrics import scoring

SUBJECTS = ("adult", "child", "dog")
PREDICATES = ("next_to", "in_front_of", "chase")
OBJECTS = ("adult", "ball/sports_ball")


def _box(rng, style, scale):
  x1, y1 = rng.randint(0, scale), rng.randint(0, scale)
  w, h = rng.randint(0, scale // 2), rng.randint(0, scale // 2)
  box = [x1, y1, x1 + w, y1 + h]
  if style == "float":
    box = [v + rng.choice((0.0, 0.5, 0.25, round(rng.random(), 3))) for v in box]
  elif style == "inverted" and rng.random() < 0.3:
    box = (
      [box[2], box[1], box[0], box[3]] if rng.random() < 0.5 else [box[2], box[3], box[0], box[1]]
    )
  return box


def _traj(rng, n, style, scale, base=None):
  if base is not None and rng.random() < 0.6:
    # Jittered copy of a GT trajectory: overlaps near the 0.5 threshold.
    d = rng.choice((0, 0, 1, 2))
    return [
      [v + rng.randint(-d, d) for v in b]
      if style != "float"
      else [v + rng.choice((0.0, 0.5, -0.5)) for v in b]
      for b in base
    ]
  return [_box(rng, style, scale) for _ in range(n)]


def _mismatch(rng, traj, mode):
  if mode == "short" and traj:
    return traj[: -rng.randint(1, len(traj))]
  if mode == "long":
    return traj + [list(traj[-1]) if traj else [0, 0, 1, 1]] * rng.randint(1, 3)
  return traj


def make_case(rng: random.Random, index: int) -> dict:
  """One random case: {"groundtruth", "prediction", "train_triplets"}."""
  style = rng.choice(("int", "int", "float", "inverted"))
  scale = rng.choice((6, 12, 40))
  max_len = rng.choice((3, 8, 15))
  mismatch_rate = rng.choice((0.0, 0.0, 0.0, 0.05, 0.2))
  score_pool = rng.choice(("continuous",) * 5 + ("ties",) * 4 + ("ints",))
  many = index % 25 == 0  # a few videos with > 200 predictions
  if many:
    max_len = 2  # keeps the recorded fixture small
  triplets = [
    (s, p, o)
    for s in SUBJECTS[: rng.randint(1, 3)]
    for p in PREDICATES[: rng.randint(1, 3)]
    for o in OBJECTS[: rng.randint(1, 2)]
  ]
  gt, pred = {}, {}
  for v in range(rng.randint(1, 5)):
    vid = f"{1000 + v}" if rng.random() < 0.5 else f"ILSVRC2015_{v:04d}"
    rels = []
    for _ in range(rng.choice((0, 1, 2, 4, 8)) if v else rng.randint(1, 8)):
      s = rng.randint(0, max_len)
      e = s + rng.randint(1, max_len)
      sub = _traj(rng, e - s, style, scale)
      obj = _traj(rng, e - s, style, scale)
      rel = {
        "triplet": list(rng.choice(triplets)),
        "subject_tid": 0,
        "object_tid": 1,
        "duration": [s, e],
        "sub_traj": sub,
        "obj_traj": obj,
      }
      if rng.random() < mismatch_rate / 4:
        rel["sub_traj"] = _mismatch(rng, sub, "short")
      rels.append(rel)
      if rng.random() < 0.1:
        rels.append(json.loads(json.dumps(rel)))  # duplicate GT
    if rng.random() < 0.85:
      gt[vid] = rels
    if rng.random() < 0.15:
      continue  # GT video without predictions
    preds = []
    n_pred = rng.randint(201, 230) if many and v == 0 else rng.randint(0, 14)
    for _ in range(n_pred):
      if rels and rng.random() < 0.6:
        g = rng.choice(rels)
        s, e = g["duration"]
        s2 = max(0, s + rng.choice((0, 0, -1, 1, -2, 2)))
        e2 = max(s2 + 1, e + rng.choice((0, 0, -1, 1, 2)))
        same_span = (s2, e2) == (s, e) and len(g["sub_traj"]) == e - s
        sub = _traj(rng, e2 - s2, style, scale, g["sub_traj"] if same_span else None)
        obj = _traj(
          rng,
          e2 - s2,
          style,
          scale,
          g["obj_traj"] if same_span and len(g["obj_traj"]) == e - s else None,
        )
        t = list(g["triplet"]) if rng.random() < 0.8 else list(rng.choice(triplets))
      else:
        s2 = rng.randint(0, max_len)
        e2 = s2 + rng.randint(1, max_len)
        sub = _traj(rng, e2 - s2, style, scale)
        obj = _traj(rng, e2 - s2, style, scale)
        t = list(rng.choice(triplets))
      if rng.random() < mismatch_rate:
        sub = _mismatch(rng, sub, rng.choice(("short", "long", "long")))
      if score_pool == "continuous":
        score = rng.random()
      elif score_pool == "ties":
        score = rng.choice((0.1, 0.5, 0.5, 0.9))
      else:
        score = rng.randint(0, 3)
      p = {"triplet": t, "score": score, "duration": [s2, e2], "sub_traj": sub, "obj_traj": obj}
      preds.append(p)
      if rng.random() < 0.1:
        preds.append(json.loads(json.dumps(p)))  # duplicate prediction
    pred[vid] = preds
  if rng.random() < 0.2:
    pred["prediction_only"] = [
      {
        "triplet": list(triplets[0]),
        "score": 1.0,
        "duration": [0, 1],
        "sub_traj": [[0, 0, 1, 1]],
        "obj_traj": [[0, 0, 1, 1]],
      }
    ]
  train = [list(t) for t in triplets if rng.random() < 0.35]
  return {"groundtruth": gt, "prediction": pred, "train_triplets": train}


def official_outputs(case, mods) -> dict:
  """Official results of one case: every protocol x split, per-video AP."""
  out = {}
  gt, pred = case["groundtruth"], case["prediction"]
  zs = set(map(tuple, _triplets(gt))) - set(map(tuple, case["train_triplets"]))
  splits = {"all": (gt, pred)}
  splits["zero_shot"] = vrd_official.zero_shot_inputs(gt, pred, zs, False)
  splits["generalized_zero_shot"] = vrd_official.zero_shot_inputs(gt, pred, zs, True)
  for protocol, mod in mods.items():
    for split, (g, p) in splits.items():
      status, res = vrd_official.run(mod, g, p, protocol)
      entry = {"status": status}
      if status == "ok":
        entry["lines"] = vrd_official.printed_lines(res)
        entry["values"] = _values(res)
        if split == "all":
          per = {}
          for vid, rels in g.items():
            if rels:
              st, r1 = vrd_official.run(mod, {vid: rels}, p, protocol)
              if st == "ok":  # (helper raises for a video without
                per[vid] = repr(r1[0])  # predictions scored alone)
          entry["video_ap"] = per
      else:
        entry["error"] = res
      out[f"{protocol}/{split}"] = entry
  return out


def _triplets(gt):
  return {tuple(r["triplet"]) for rels in gt.values() for r in rels}


def _values(res):
  mean_ap, rec, prec = res
  return [
    float(mean_ap),
    float(rec[50]),
    float(rec[100]),
    float(prec[1]),
    float(prec[5]),
    float(prec[10]),
  ]


def has_int_scores(case) -> bool:
  """Integer scores: the array path takes float64 scores, so it differs."""
  return any(isinstance(p["score"], int) for ps in case["prediction"].values() for p in ps)


def our_outputs(case, protocols, tables=False) -> dict:
  """Our results of one case, in the layout of `official_outputs`.

  tables=False scores the dicts (`scoring.evaluate`), True the array tables
  built from them (`scoring.evaluate_tables`).
  """
  out = {}
  gt, pred = case["groundtruth"], case["prediction"]
  zs = scoring.zero_shot_triplets(gt, {"train": [{"triplet": t} for t in case["train_triplets"]]})
  splits = {
    "all": (gt, pred),
    "zero_shot": scoring.zero_shot_split(gt, pred, zs, False),
    "generalized_zero_shot": scoring.zero_shot_split(gt, pred, zs, True),
  }
  for protocol in protocols:
    for split, (g, p) in splits.items():
      try:
        if tables:
          r = scoring.evaluate_tables(
            columns.RelationTable.from_dicts(g), columns.RelationTable.from_dicts(p), protocol
          )
        else:
          r = scoring.evaluate(g, p, protocol)
      except scoring.ScoringError as e:
        out[f"{protocol}/{split}"] = {"status": "error", "message": str(e)}
        continue
      entry = {"status": "ok", "lines": r.official_lines(), "values": list(r.as_dict().values())}
      if split == "all":
        entry["video_ap"] = {
          vid: repr(ap) if protocol == "helper" else repr(round(float(ap), 4))
          for vid, ap in r.video_ap.items()
        }
      out[f"{protocol}/{split}"] = entry
  return out


def compare(official: dict, ours: dict) -> list[str]:
  """Differences between official and our outputs of one case (empty: equal)."""
  diffs = []
  for key, o in official.items():
    u = ours.get(key)
    if u is None:
      diffs.append(f"{key}: missing")
    elif o["status"] != u["status"]:
      diffs.append(
        f"{key}: official {o['status']} "
        f"{o.get('error', '')} vs ours {u['status']} "
        f"{u.get('message', '')}"
      )
    elif o["status"] == "ok":
      if o["lines"] != u["lines"]:
        diffs.append(f"{key}: printed {o['lines']} vs {u['lines']}")
      if o["values"] != u["values"]:
        diffs.append(f"{key}: values {o['values']} vs {u['values']}")
      ours_ap = {v: u["video_ap"].get(v) for v in o.get("video_ap", {})}
      if "video_ap" in o and o["video_ap"] != ours_ap:
        diffs.append(f"{key}: per-video AP {o['video_ap']} vs {ours_ap}")
  return diffs


def _fuzz_duration(rng):
  s = rng.randint(0, 6)
  e = s + rng.randint(-1, 6)
  cast = lambda x: float(x) + rng.choice((0.0, 0.0, 0.5)) if (rng.random() < 0.25) else x
  return [cast(s), cast(e)]


def viou_fuzz(common, rng, n) -> tuple[int, list[str]]:
  """Official `common.viou` vs `kernels.pair_vious` on n random pairs.

  Int / float duration bounds (the official TypeError branches), box lists
  shorter or longer than the duration (IndexError), zero volumes
  (ZeroDivisionError), inverted and float boxes. Equal: same exception, or
  the same float to the last bit.
  """
  codes = {
    "TypeError": kernels.TYPE_ERROR,
    "IndexError": kernels.INDEX_ERROR,
    "ZeroDivisionError": kernels.ZERO_DIVISION,
  }
  equal, diffs = 0, []
  for i in range(n):
    style = rng.choice(("int", "float", "inverted", "zero"))
    d1, d2 = _fuzz_duration(rng), _fuzz_duration(rng)
    trajs = []
    for d in (d1, d2):
      length = max(0, int(d[1] - d[0]) + rng.choice((0, 0, 0, -1, 1)))
      if style == "zero":
        trajs.append([[3, 3, 2, 2 + rng.randint(0, 1)]] * length)
      else:
        trajs.append([_box(rng, style if style != "zero" else "int", 10) for _ in range(length)])
    try:
      want = ("ok", repr(common.viou(trajs[0], d1, trajs[1], d2)))
    except Exception as e:  # pylint: disable=broad-except
      want = ("error", codes.get(type(e).__name__, type(e).__name__))
    store = columns.TrajectoryStore()
    (o1, n1), (o2, n2) = store.add(trajs[0]), store.add(trajs[1])
    v, status = kernels.pair_vious(
      store.boxes(),
      [o1, o2],
      [n1, n2],
      [0],
      [1],
      [d1],
      [d2],
      [columns.duration_flags(*d1)],
      [columns.duration_flags(*d2)],
    )
    got = ("ok", repr(float(v[0]))) if status[0] == kernels.OK else ("error", int(status[0]))
    if got == want:
      equal += 1
    else:
      diffs.append(f"viou pair {i}: {d1} {d2} {trajs}: official {want}, ours {got}")
  return equal, diffs


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument(
    "--official", required=True, help="checkout of xdshang/VidVRD-helper (helper protocol)"
  )
  ap.add_argument("--official-vru20", help="checkout of NExTplusplus/VidVRD-helper (vru20)")
  ap.add_argument("--cases", type=int, default=300)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument(
    "--viou-pairs", type=int, default=20000, help="random pairs for the direct vIoU comparison"
  )
  ap.add_argument("--record", help="write cases + official outputs here (.json.xz)")
  args = ap.parse_args(argv)
  mods = {"helper": vrd_official.load(args.official, "helper")}
  if args.official_vru20:
    mods["vru20"] = vrd_official.load(args.official_vru20, "vru20")
  rng = random.Random(args.seed)
  records, equal, refused = [], 0, 0
  tab_cases = tab_equal = 0
  for i in range(args.cases):
    case = make_case(rng, i)
    off = official_outputs(case, mods)
    ours = our_outputs(case, list(mods))
    diffs = compare(off, ours)
    if not has_int_scores(case):
      tab_cases += 1
      tab_diffs = compare(off, our_outputs(case, list(mods), tables=True))
      tab_equal += not tab_diffs
      diffs += [f"tables: {d}" for d in tab_diffs]
    refused += any(e["status"] == "error" for e in off.values())
    if diffs:
      print(f"case {i}: DIFFERENT")
      for d in diffs:
        print("   ", d[:2000])
    else:
      equal += 1
    records.append({"case": case, "official": off})
  evals = args.cases * len(mods) * 3
  print(
    f"{equal}/{args.cases} cases equal ({evals} evaluations: protocols "
    f"{sorted(mods)} x all / zero-shot / generalized zero-shot, plus "
    f"per-video AP); {refused} cases where the official code raises in at "
    "least one evaluation"
  )
  print(
    f"array path (evaluate_tables): {tab_equal}/{tab_cases} cases equal "
    "(the cases without integer scores)"
  )
  common = vrd_official.load_common(args.official)
  v_equal, v_diffs = viou_fuzz(common, random.Random(args.seed + 1), args.viou_pairs)
  for d in v_diffs[:20]:
    print("   ", d[:500])
  print(
    f"vIoU: {v_equal}/{args.viou_pairs} random pairs equal to the "
    "official common.viou (value bits or the same exception)"
  )
  if args.record:
    tmp = args.record + ".tmp"
    with lzma.open(tmp, "wt", preset=9) as f:
      json.dump({"seed": args.seed, "cases": records}, f, separators=(",", ":"))
    os.replace(tmp, args.record)
    print(f"wrote {args.record}")
  ok = equal == args.cases and tab_equal == tab_cases and v_equal == args.viou_pairs
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
