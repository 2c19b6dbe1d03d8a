"""Hand-computed answers of the scorer (ranking, matching, protocols, the minimal suite)."""

import numpy as np
import pytest

from relations.video_relations.metrics import scoring
from tests.video_relations.metrics.helpers import gt, pred

NEXT = ("adult", "next_to", "dog")
BEHIND = ("adult", "behind", "dog")
SQ, FAR = [0, 0, 9, 9], [20, 0, 29, 9]
SHIFT = [5, 0, 14, 9]  # vs SQ: 50 / (200 - 50) = 1/3 per frame


def _suite():
  """Videos A (5 ranked cases), C (TP at rank 55), D, E, F."""
  g = {
    "A": [gt(NEXT, (0, 4), SQ, FAR), gt(NEXT, (10, 14), SQ, FAR)],
    "C": [gt(NEXT, (0, 2), SQ, FAR)],
    "D": [gt(NEXT, (0, 2), SQ, FAR)],  # GT video, no predictions
    "E": [],  # empty GT: skipped
  }
  p = {
    "A": [
      pred(BEHIND, 0.9, (0, 4), SQ, FAR),  # wrong triplet first: FP
      pred(NEXT, 0.8, (0, 4), SQ, FAR),  # TP (GT 0)
      pred(NEXT, 0.7, (0, 4), SQ, FAR),  # duplicate: FP
      pred(NEXT, 0.6, (10, 12), SQ, FAR),  # truncated: vIoU 0.5: TP
      pred(NEXT, 0.5, (10, 14), SHIFT, FAR),  # shifted: 1/3: FP
    ],
    "C": (
      [pred(BEHIND, 1.0 - i / 100, (0, 2), SQ, FAR) for i in range(54)]
      + [pred(NEXT, 0.1, (0, 2), SQ, FAR)]
    ),
    "E": [pred(NEXT, 1.0, (0, 2), SQ, FAR)],
    "F": [pred(NEXT, 1.0, (0, 2), SQ, FAR)],  # prediction-only video
  }
  return g, p


def test_minimal_suite_helper():
  g, p = _suite()
  r = scoring.evaluate(g, p, "helper")
  # A: hits F T F T F, 2 GT: AP = 0.5 * 0.5 + 0.5 * 0.5.
  # C: one TP at rank 55: AP = float32(1 / 55). D: 0.
  ap_c = np.float64(np.float32(1) / np.float32(55))
  assert r.video_ap == {"A": 0.5, "C": ap_c, "D": 0.0}
  assert r.mean_ap == np.mean([0.5, ap_c, 0.0])
  assert r.num_videos == 3 and r.num_gt == 4
  # R@50: 2 of 4 GT (C's TP is at rank 55); R@100: 3 of 4.
  assert r.rec_at_n == {50: np.float32(0.5), 100: np.float32(0.75)}
  # Tagging: A and C rank [behind (miss), next_to (hit)]; D has nothing.
  assert r.mprec_at_n[1] == 0.0
  assert r.mprec_at_n[5] == r.mprec_at_n[10] == np.mean([np.float32(0.5), np.float32(0.5), 0.0])
  assert r.as_dict() == {
    "mAP": float(np.mean([0.5, ap_c, 0.0])),
    "R@50": 0.5,
    "R@100": 0.75,
    "P@1": 0.0,
    "P@5": float(np.mean([0.5, 0.5, 0.0])),
    "P@10": float(np.mean([0.5, 0.5, 0.0])),
  }


def test_tp_at_rank_210_separates_protocols():
  g = {"B": [gt(NEXT, (0, 2), SQ, FAR)]}
  p = {
    "B": (
      [pred(BEHIND, 1.0 - i / 1000, (0, 2), SQ, FAR) for i in range(209)]
      + [pred(NEXT, 0.01, (0, 2), SQ, FAR)]
    )
  }
  helper = scoring.evaluate(g, p, "helper")
  vru20 = scoring.evaluate(g, p, "vru20")
  assert helper.mean_ap == np.float64(np.float32(1) / np.float32(210))
  assert vru20.mean_ap == 0.0  # cut to the top 200
  assert vru20.rec_at_n == {50: 0.0, 100: 0.0}
  # vru20 rounds to 4 decimals; tagging sees 2 triplets only in helper.
  assert helper.mprec_at_n[5] == np.float32(0.5)
  assert vru20.mprec_at_n == {1: 0.0, 5: 0.0, 10: 0.0}
  assert round(float(helper.mean_ap), 4) == 0.0048


def test_tied_scores_keep_submission_order():
  g = {"v": [gt(NEXT, (0, 2), SQ, FAR)]}
  fp = pred(NEXT, 0.5, (0, 2), SHIFT, FAR)
  tp = pred(NEXT, 0.5, (0, 2), SQ, FAR)
  assert scoring.evaluate(g, {"v": [fp, tp]}).mean_ap == 0.5
  assert scoring.evaluate(g, {"v": [tp, fp]}).mean_ap == 1.0


def test_first_gt_wins_an_overlap_tie():
  # One-frame, one-pixel-high boxes. p0 has vIoU 7/13 with both GT (a tie);
  # p1 fits GT 0 exactly but GT 1 only at 4/16. First-GT-wins gives p0 -> GT
  # 0 and leaves p1 a false positive (AP 0.5); the other choice gives 1.0.
  obj = [0, 0, 0, 0]
  g = {"v": [gt(NEXT, (0, 1), [0, 0, 9, 0], obj), gt(NEXT, (0, 1), [6, 0, 15, 0], obj)]}
  p = {
    "v": [pred(NEXT, 0.9, (0, 1), [3, 0, 12, 0], obj), pred(NEXT, 0.8, (0, 1), [0, 0, 9, 0], obj)]
  }
  assert scoring.evaluate(g, p).mean_ap == 0.5


def test_duplicate_gt_each_matched_once():
  g = {"v": [gt(NEXT, (0, 2), SQ, FAR), gt(NEXT, (0, 2), SQ, FAR)]}
  p = {"v": [pred(NEXT, 0.9, (0, 2), SQ, FAR)] * 3}
  r = scoring.evaluate(g, p)
  assert r.mean_ap == 1.0  # two TPs, then one FP
  assert r.rec_at_n[50] == np.float32(1.0)


def test_non_finite_score_consumes_gt_but_is_false_positive():
  g = {"v": [gt(NEXT, (0, 2), SQ, FAR)]}
  p = {"v": [pred(NEXT, float("inf"), (0, 2), SQ, FAR), pred(NEXT, 0.5, (0, 2), SQ, FAR)]}
  r = scoring.evaluate(g, p)
  assert r.mean_ap == 0.0 and r.rec_at_n[100] == 0.0


def test_refusals_name_video_prediction_and_field():
  g = {"v": [gt(NEXT, (0, 3), SQ, FAR)]}
  short = pred(NEXT, 0.9, (0, 3), SQ, FAR, n=1)  # needs frames 1 and 2
  with pytest.raises(scoring.ScoringError, match=r"video 'v', prediction 0, field 'sub_traj'"):
    scoring.evaluate(g, {"v": [short]})
  # helper fails when no GT video has a prediction; vru20 gives zeros.
  with pytest.raises(scoring.ScoringError, match="no video with ground"):
    scoring.evaluate(g, {}, "helper")
  assert scoring.evaluate(g, {}, "vru20").as_dict() == dict.fromkeys(scoring.METRIC_KEYS, 0.0)
  with pytest.raises(scoring.ScoringError, match="no video has ground"):
    scoring.evaluate({"v": []}, {})
  with pytest.raises(scoring.ScoringError, match=r"prediction 1.*'score'"):
    scoring.evaluate(g, {"v": [pred(NEXT, 0.1, (0, 3), SQ, FAR), {"triplet": list(NEXT)}]})


def test_integer_scores_with_a_missed_triplet_are_refused():
  # The official tagging code puts -inf into an int64 array and fails.
  g = {"v": [gt(NEXT, (0, 2), SQ, FAR)]}
  p = {"v": [pred(BEHIND, 2, (0, 2), SQ, FAR), pred(NEXT, 1, (0, 2), SQ, FAR)]}
  with pytest.raises(scoring.ScoringError, match="integers"):
    scoring.evaluate(g, p)
  assert scoring.evaluate(g, {"v": [pred(NEXT, 1, (0, 2), SQ, FAR)]}).mean_ap == 1.0


def test_zero_shot_splits():
  g = {
    "v": [gt(NEXT, (0, 2), SQ, FAR), gt(BEHIND, (0, 2), SQ, FAR)],
    "w": [gt(NEXT, (0, 2), SQ, FAR)],
  }
  train = {"t": [gt(NEXT, (0, 1), SQ, FAR)]}
  p = {"v": [pred(NEXT, 0.9, (0, 2), SQ, FAR), pred(BEHIND, 0.8, (0, 2), SQ, FAR)]}
  zs = scoring.zero_shot_triplets(g, train)
  assert zs == {BEHIND}
  gz, pz = scoring.zero_shot_split(g, p, zs, generalized=False)
  assert list(gz) == ["v"] and [x["triplet"] for x in pz["v"]] == [list(BEHIND)]
  assert scoring.evaluate(gz, pz).mean_ap == 1.0
  gg, pg = scoring.zero_shot_split(g, p, zs, generalized=True)
  assert len(pg["v"]) == 2
  # Generalised: the seen-triplet prediction ranks first as an FP.
  assert scoring.evaluate(gg, pg).mean_ap == 0.5
