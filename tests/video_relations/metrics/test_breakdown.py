"""The breakdown (metrics/breakdown.py): hand-computed values, recombination, the CLI flag."""

import json

import numpy as np
import pytest

from relations.video_relations.metrics import breakdown
from relations.video_relations.metrics import cli
from relations.video_relations.metrics import scoring


def _rel(triplet, begin, end, score=None, box=(0, 0, 9, 9), obj_box=None):
  r = {
    "triplet": list(triplet),
    "duration": [begin, end],
    "sub_traj": [list(box)] * (end - begin),
    "obj_traj": [list(obj_box or box)] * (end - begin),
  }
  if score is not None:
    r["score"] = score
  return r


# Video a: a chase (10 frames) and an above (100 frames); video b: a hold (400 frames) and a
# next_to (50 frames) nobody predicts. Predictions: a: chase TP 0.9, above with wrong boxes FP 0.8,
# above TP 0.7; b: hold TP 0.6.
GT = {
  "a": [_rel(("dog", "chase", "cat"), 0, 10), _rel(("dog", "above", "cat"), 0, 100)],
  "b": [_rel(("adult", "hold", "cup"), 0, 400), _rel(("adult", "next_to", "cup"), 0, 50)],
}
PRED = {
  "a": [
    _rel(("dog", "chase", "cat"), 0, 10, 0.9),
    _rel(("dog", "above", "cat"), 0, 100, 0.8, box=(50, 50, 59, 59)),
    _rel(("dog", "above", "cat"), 0, 100, 0.7),
  ],
  "b": [_rel(("adult", "hold", "cup"), 0, 400, 0.6)],
}
AP_A = 0.5 * 1.0 + 0.5 * (2 / 3)  # TP, FP, TP over 2 GT
COLS = ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")


def _check(m, mAP, r50, p1, p5, num_videos, num_gt):
  assert m["mAP"] == pytest.approx(mAP, rel=1e-6)
  assert m["R@50"] == pytest.approx(r50, rel=1e-6) and m["R@100"] == pytest.approx(r50, rel=1e-6)
  assert m["P@1"] == pytest.approx(p1, rel=1e-6)
  assert m["P@5"] == pytest.approx(p5, rel=1e-6) and m["P@10"] == pytest.approx(p5, rel=1e-6)
  assert (m["num_videos"], m["num_gt"]) == (num_videos, num_gt)


def test_hand_computed_values():
  t = breakdown.breakdown(GT, PRED, "helper", "vidor")
  _check(t["overall"], (AP_A + 0.5) / 2, 3 / 4, 1.0, 1.0, 2, 4)
  assert t["overall"] == dict(scoring.evaluate(GT, PRED).as_dict(), num_videos=2, num_gt=4)
  # action: chase in a (TP), hold in b (TP).
  _check(t["predicate_type"]["action"], 1.0, 1.0, 1.0, 1.0, 2, 2)
  # spatial: a: FP then TP (AP 0.5); b: GT, no spatial prediction (AP 0, P@k 0).
  _check(t["predicate_type"]["spatial"], 0.25, 0.5, 0.5, 0.5, 2, 2)
  _check(t["predicate"]["chase"], 1.0, 1.0, 1.0, 1.0, 1, 1)
  _check(t["predicate"]["above"], 0.5, 1.0, 1.0, 1.0, 1, 1)
  # next_to: no prediction anywhere: the helper scorer cannot score it, reported as zeros.
  _check(t["predicate"]["next_to"], 0.0, 0.0, 0.0, 0.0, 1, 1)
  assert "helper scorer fails" in t["predicate"]["next_to"]["note"]
  _check(t["subject"]["dog"], AP_A, 1.0, 1.0, 1.0, 1, 2)
  _check(t["object"]["cup"], 0.5, 0.5, 1.0, 1.0, 1, 2)
  # Durations (edges 90, 300), every prediction of the video kept:
  # short = chase (a: TP first, then 2 FPs: AP 1) + next_to (b: the hold is an FP: AP 0);
  # tagging: a ranks chase (short GT: hit) then above (miss), b's hold misses:
  # P@1 = (1 + 0) / 2, P@5 read at 2 triplets in a = (1/2 + 0) / 2.
  _check(t["duration"]["short"], 0.5, 0.5, 0.5, 0.25, 2, 2)
  # medium = above (a: chase FP, above FP, above TP: AP 1/3; tagging: chase miss, above hit).
  _check(t["duration"]["medium"], 1 / 3, 1.0, 0.0, 0.5, 1, 1)
  _check(t["duration"]["long"], 1.0, 1.0, 1.0, 1.0, 1, 1)
  assert breakdown.duration_bin(89) == "short" and breakdown.duration_bin(90) == "medium"
  assert breakdown.duration_bin(300) == "long"


def test_vru20_cut_applies_before_filtering():
  # 201 above predictions outrank the chase TP in video a: VRU'20 keeps the top 200, so the chase
  # is gone from every group, as from the official scorer's view.
  pred = {
    "a": [_rel(("dog", "above", "cat"), 0, 100, 0.95, box=(50, 50, 59, 59))] * 201 + PRED["a"][:1],
    "b": PRED["b"],
  }
  t = breakdown.breakdown(GT, pred, "vru20", "vidor")
  assert t["overall"]["R@100"] == scoring.evaluate(GT, pred, "vru20").as_dict()["R@100"]
  assert t["predicate"]["chase"]["R@50"] == 0.0
  assert breakdown.breakdown(GT, pred, "helper", "vidor")["predicate"]["chase"]["R@50"] == 1.0


def _random_case(rng, one_type_per_video):
  spatial, action = ("above", "next_to", "behind"), ("chase", "hold", "ride")
  gt, pred = {}, {}
  for v in range(8):
    kinds = [spatial if v % 2 else action] if one_type_per_video else [spatial, action]
    gt[f"v{v}"], pred[f"v{v}"] = [], []
    for _ in range(int(rng.integers(1, 5))):
      p = str(rng.choice(rng.choice(kinds)))
      b = int(rng.integers(0, 20))
      gt[f"v{v}"].append(_rel(("dog", p, "cat"), b, b + int(rng.integers(5, 30))))
    for _ in range(int(rng.integers(0, 12))):
      p = str(rng.choice(rng.choice(kinds)))
      b = int(rng.integers(0, 20))
      box = (0, 0, 9, 9) if rng.random() < 0.6 else (3, 3, 12, 12)
      pred[f"v{v}"].append(
        _rel(("dog", p, "cat"), b, b + int(rng.integers(5, 30)), float(rng.random()), box)
      )
  return gt, pred


@pytest.mark.parametrize("seed", range(4))
def test_per_type_numbers_recombine_into_the_overall(seed):
  rng = np.random.default_rng(seed)
  # Mixed videos (< 50 predictions each, so R@50 does not cut): hits add up over the types.
  gt, pred = _random_case(rng, one_type_per_video=False)
  t = breakdown.breakdown(gt, pred, "helper", "vidor")
  groups = t["predicate_type"].values()
  assert sum(g["num_gt"] for g in groups) == t["overall"]["num_gt"]
  for k in ("R@50", "R@100"):
    hits = sum(round(g[k] * g["num_gt"]) for g in groups)
    assert hits == round(t["overall"][k] * t["overall"]["num_gt"])
  pred_hits = sum(round(g["R@50"] * g["num_gt"]) for g in t["predicate"].values())
  assert pred_hits == round(t["overall"]["R@50"] * t["overall"]["num_gt"])
  # One type per video: each video's lists are untouched by the filter, so the per-video
  # numbers (mAP, P@k) recombine too, weighted by the number of videos (R@N by the GT count).
  gt, pred = _random_case(rng, one_type_per_video=True)
  t = breakdown.breakdown(gt, pred, "helper", "vidor")
  groups = t["predicate_type"].values()
  for k in COLS:
    w = "num_gt" if k.startswith("R@") else "num_videos"
    mixed = sum(g[k] * g[w] for g in groups) / t["overall"][w]
    assert mixed == pytest.approx(t["overall"][k], rel=1e-6, abs=1e-9), k


def test_predicate_types():
  assert breakdown.predicate_type("vidor", "in_front_of") == "spatial"
  assert breakdown.predicate_type("vidor", "play(instrument)") == "action"
  assert breakdown.predicate_type("vidvrd", "front") == "spatial"
  assert breakdown.predicate_type("vidvrd", "walk_left") == "action"
  assert breakdown.predicate_type("vidvrd", "taller") == "comparative"
  assert breakdown.predicate_type("vidor", "flies") == "other"


def test_cli_breakdown_overall_equals_the_official_numbers(tmp_path, capsys):
  gt_path, pred_path, out = tmp_path / "gt.json", tmp_path / "pred.json", tmp_path / "m.json"
  gt_file = {
    v: [dict(r, subject_tid=2 * i, object_tid=2 * i + 1) for i, r in enumerate(rels)]
    for v, rels in GT.items()
  }
  gt_path.write_text(json.dumps(gt_file))
  pred_path.write_text(json.dumps({"version": "VERSION 1.0", "results": PRED}))
  argv = ["--groundtruth", str(gt_path), "--prediction", str(pred_path), "--dataset", "vidor"]
  assert cli.main([*argv, "--breakdown", "--duration-bins", "20,200", "--output", str(out)]) == 0
  printed = capsys.readouterr().out
  assert "predicate_type" in printed and "spatial" in printed
  m = json.loads(out.read_text())
  for k in COLS:
    assert m["breakdown"]["overall"][k] == m[k]
  assert m["breakdown"]["duration_bins"] == [20, 200]
  assert set(m["breakdown"]["duration"]) == {"short", "medium", "long"}
  assert cli.main([*argv, "--breakdown", "--duration-bins", "300,90"]) == 2
  assert "--duration-bins: edges must increase: '300,90'" in capsys.readouterr().err
