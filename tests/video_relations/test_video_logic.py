"""Host-side video logic: segments, interpolation, association, submission,
tracking, metrics. Exact values against hand-computed answers."""

import json
import os

import numpy as np
import pytest

from relations.video_relations.metrics import validate
from relations.video_relations.inference import association
from relations.video_relations.inference import interpolate
from relations.video_relations.metrics import detection as metrics
from relations.video_relations.inference import pipeline
from relations.video_relations.inference import segments
from relations.video_relations.inference import submission
from relations.video_relations.inference import tracking


# ---------------------------------------------------------------- segments
def test_segments_match_baseline_grid_and_cover_tail():
  # Baseline: [(i, i + 30) for i in range(0, 100 - 30 + 1, 15)].
  assert segments.segment_video(0, 100, cover_tail=False) == [
    (0, 30),
    (15, 45),
    (30, 60),
    (45, 75),
    (60, 90),
  ]
  assert segments.segment_video(0, 100) == [
    (0, 30),
    (15, 45),
    (30, 60),
    (45, 75),
    (60, 90),
    (70, 100),
  ]
  assert segments.segment_video(0, 90) == [(0, 30), (15, 45), (30, 60), (45, 75), (60, 90)]
  assert segments.segment_video(0, 20) == [(0, 20)]
  assert segments.segment_video(0, 20, cover_tail=False) == []
  assert segments.segment_video(5, 5) == []
  assert segments.segment_video(0, 12, 12, 4) == [(0, 12)]
  with pytest.raises(ValueError, match="stride 0"):
    segments.segment_video(0, 10, 5, 0)


# ---------------------------------------------------------------- interpolate
def test_interpolation_is_linear_inside_and_holds_outside():
  out = interpolate.interpolate_boxes([4, 8], [[0, 0, 4, 4], [4, 8, 8, 12]], 2, 11)
  np.testing.assert_array_equal(out[0], [0, 0, 4, 4])  # frame 2: held
  np.testing.assert_array_equal(out[2], [0, 0, 4, 4])  # frame 4
  np.testing.assert_array_equal(out[3], [1, 2, 5, 6])  # frame 5
  np.testing.assert_array_equal(out[6], [4, 8, 8, 12])  # frame 8
  np.testing.assert_array_equal(out[8], [4, 8, 8, 12])  # frame 10: held
  assert out.shape == (9, 4)


def test_interpolation_rejects_bad_input():
  with pytest.raises(ValueError, match="increase strictly"):
    interpolate.interpolate_boxes([4, 4], np.zeros((2, 4)), 0, 5)
  with pytest.raises(ValueError, match="2 frame ids and 1 boxes"):
    interpolate.interpolate_boxes([4, 5], np.zeros((1, 4)), 0, 5)


def test_observed_span_adds_half_a_step_and_clips():
  assert interpolate.observed_span([8, 12, 16], 4, 100) == (6, 18)
  assert interpolate.observed_span([0, 4], 4, 100) == (0, 6)
  assert interpolate.observed_span([96], 4, 98) == (94, 98)


def test_own_window_and_box_smoothing():
  assert pipeline.own_window(0, 12, 3, 50) == (0, 9)
  assert pipeline.own_window(4, 16, 3, 50) == (7, 13)
  assert pipeline.own_window(38, 50, 3, 50) == (41, 50)
  b = np.array([[0, 0, 4, 4], [2, 0, 6, 4], [10, 0, 14, 4]], float)
  out = pipeline.smooth_boxes(b, 0.5)
  np.testing.assert_array_equal(out[[0, 2]], b[[0, 2]])
  np.testing.assert_allclose(out[1], (0.5 * b[0] + b[1] + 0.5 * b[2]) / 2)
  np.testing.assert_array_equal(pipeline.smooth_boxes(b, 0.0), b)


# ---------------------------------------------------------------- association
def _rel(triplet, start, boxes_s, boxes_o, conf, meta=None):
  return association.Relation(
    triplet,
    start,
    start + len(boxes_s),
    np.asarray(boxes_s, float),
    np.asarray(boxes_o, float),
    [conf],
    meta or {},
  )


def test_shared_frames_viou_by_hand():
  a = [[0, 0, 9, 9], [0, 0, 9, 9]]  # frames 0, 1; area 100 each
  b = [[5, 0, 14, 9], [0, 0, 9, 9], [0, 0, 1, 1]]  # frames 1, 2, 3
  # Shared frame: 1 only; a[1] vs b[0]: inter 5*10 = 50, union 150.
  assert association.shared_frames_viou(a, 0, b, 1) == pytest.approx(50 / 150)
  assert association.shared_frames_viou(a, 0, b, 2) == 0.0


def test_association_merges_averages_and_keeps_first_confidence():
  t = ("dog", "chase", "cat")
  box = [0, 0, 9, 9]
  shifted = [1, 0, 10, 9]
  seg0 = [_rel(t, 0, [box] * 4, [box] * 4, 0.6)]
  seg1 = [
    _rel(t, 2, [shifted] * 4, [box] * 4, 0.2),
    # A relation first seen in the second segment: the baseline would
    # give it the confidences [1] (bug); we keep its own 0.3.
    _rel(("cat", "away", "dog"), 2, [box] * 4, [box] * 4, 0.3),
  ]
  rels = association.greedy_relational_association([(2, seg1), (0, seg0)])
  assert len(rels) == 2
  r, late = rels
  assert (r.start, r.end) == (0, 6)
  assert r.score == pytest.approx(0.4)
  np.testing.assert_allclose(r.sub_traj[:2], [box, box])
  np.testing.assert_allclose(r.sub_traj[2:4], [[0.5, 0, 9.5, 9]] * 2)
  np.testing.assert_allclose(r.sub_traj[4:], [shifted, shifted])
  assert late.triplet == ("cat", "away", "dog") and late.score == 0.3
  # The baseline's behaviour on request: the late relation starts at confidence 1 (its own 0.3 is
  # dropped) and now outranks the chained one; first-segment relations keep theirs.
  r, late = association.greedy_relational_association([(2, seg1), (0, seg0)], helper_quirk=True)
  assert r.confs == [0.6, 0.2] and late.confs == [1.0] and late.score == 1.0
  # A chain started late by the quirk: mean of 1 and the extension's confidence.
  seg2 = [_rel(("cat", "away", "dog"), 4, [box] * 4, [box] * 4, 0.5)]
  rels = association.greedy_relational_association(
    [(0, seg0), (2, seg1), (4, seg2)], helper_quirk=True
  )
  assert rels[1].triplet == ("cat", "away", "dog") and rels[1].confs == [1.0, 0.5]


def test_trim_weak_ends_keeps_the_strong_core_of_a_chain():
  t = ("dog", "chase", "cat")
  segs = []
  for k, conf in enumerate([0.2, 0.8, 0.9, 0.3]):
    boxes = [[k, 0, k + 9, 9]] * 6  # 6 frames from 4k: chains overlap
    segs.append((4 * k, [_rel(t, 4 * k, boxes, boxes, conf)]))
  (r,) = association.greedy_relational_association(segs)
  assert r.spans == [(0, 6), (4, 10), (8, 14), (12, 18)]
  assert (r.start, r.end) == (0, 18)
  full = r.sub_traj.copy()
  association.trim_weak_ends(r, 0.5)  # threshold 0.45: keeps 0.8, 0.9
  assert (r.start, r.end) == (4, 14)
  assert r.confs == [0.8, 0.9] and r.spans == [(4, 10), (8, 14)]
  assert r.score == pytest.approx(0.85)
  np.testing.assert_array_equal(r.sub_traj, full[4:14])
  np.testing.assert_array_equal(r.obj_traj, full[4:14])
  # Ratio 0 or a single prediction: unchanged.
  one = _rel(t, 3, [[0, 0, 9, 9]] * 5, [[0, 0, 9, 9]] * 5, 0.4)
  one.spans = [(3, 8)]
  assert association.trim_weak_ends(one, 0.9).end == 8
  assert association.trim_weak_ends(r, 0.0).start == 4


def test_shrink_cuts_both_ends_except_at_the_video_ends():
  t = ("dog", "chase", "cat")
  traj = np.arange(10 * 4, dtype=float).reshape(10, 4)
  r = association.shrink(_rel(t, 5, traj, traj + 1, 0.5), 2, 100)
  assert (r.start, r.end) == (7, 13)
  np.testing.assert_array_equal(r.sub_traj, traj[2:8])
  np.testing.assert_array_equal(r.obj_traj, traj[2:8] + 1)
  # Starting at frame 0 / ending at the last frame: that end stays.
  r = association.shrink(_rel(t, 0, traj, traj, 0.5), 2, 100)
  assert (r.start, r.end) == (0, 8)
  r = association.shrink(_rel(t, 90, traj, traj, 0.5), 2, 100)
  assert (r.start, r.end) == (92, 100)
  # Never below one frame.
  r = association.shrink(_rel(t, 5, traj[:3], traj[:3], 0.5), 2, 100)
  assert (r.start, r.end) == (6, 7)
  np.testing.assert_array_equal(r.sub_traj, traj[1:2])


def test_association_threshold_triplet_and_one_extension_per_segment():
  t = ("dog", "chase", "cat")
  box, far = [0, 0, 9, 9], [50, 50, 59, 59]
  seg0 = [_rel(t, 0, [box] * 4, [box] * 4, 0.9)]
  seg1 = [
    _rel(t, 2, [box] * 4, [box] * 4, 0.8),  # merges
    _rel(t, 2, [box] * 4, [box] * 4, 0.7),  # relation already taken
    _rel(t, 2, [far] * 4, [box] * 4, 0.6),  # subject vIoU 0
    _rel(("dog", "bite", "cat"), 2, [box] * 4, [box] * 4, 0.5),
  ]
  rels = association.greedy_relational_association([(0, seg0), (2, seg1)])
  assert [round(r.score, 6) for r in rels] == [0.85, 0.7, 0.6, 0.5]
  # With a threshold above the overlap nothing merges.
  seg1b = [_rel(t, 2, [[3, 0, 12, 9]] * 4, [box] * 4, 0.8)]
  rels = association.greedy_relational_association([(0, seg0), (2, seg1b)], threshold=0.6)
  assert len(rels) == 2
  rels = association.greedy_relational_association([(0, seg0), (2, seg1b)], threshold=0.5)
  assert len(rels) == 1  # vIoU = 70 / 130 = 0.538


def test_association_keeps_topk_per_segment_by_score():
  t = ("dog", "chase", "cat")
  seg = [
    _rel(t, 0, [[i * 20, 0, i * 20 + 9, 9]], [[0, 0, 9, 9]], c)
    for i, c in enumerate([0.1, 0.5, 0.3])
  ]
  rels = association.greedy_relational_association([(0, seg)], topk_per_segment=2)
  assert [r.score for r in rels] == [0.5, 0.3]


# ---------------------------------------------------------------- submission
def test_submission_round_trip_validates_and_is_atomic(tmp_path):
  t = ("adult", "ride", "bicycle")
  r = _rel(t, 3, [[0, 0, 9.123, 9]] * 2, [[1, 1, 5, 5]] * 2, 0.5)
  path = submission.write_submission({"123": [r]}, tmp_path / "sub.json")
  assert os.listdir(tmp_path) == ["sub.json"]
  with open(path) as f:
    sub = json.load(f)
  assert sub == {
    "version": "VERSION 1.0",
    "results": {
      "123": [
        {
          "triplet": ["adult", "ride", "bicycle"],
          "score": 0.5,
          "duration": [3, 5],
          "sub_traj": [[0, 0, 9.12, 9]] * 2,
          "obj_traj": [[1, 1, 5, 5]] * 2,
        }
      ]
    },
  }
  report = validate.validate_submission(sub, None, "vru20", "vidor")
  assert report.ok and not report.problems, report.summary()
  xz = submission.write_submission({"123": [r]}, tmp_path / "sub.json.xz")
  import lzma  # pylint: disable=g-import-not-at-top

  with lzma.open(xz) as f:
    assert json.load(f) == sub


def test_submission_rejects_wrong_box_count_and_cut_is_stable():
  bad = association.Relation(("a", "b", "c"), 0, 3, np.zeros((2, 4)), np.zeros((3, 4)), [1.0])
  with pytest.raises(ValueError, match=r"\[0, 3\) has 2 subject"):
    submission.relation_to_json(bad)
  rels = [{"score": s, "i": i} for i, s in enumerate([0.5, 0.9, 0.5, 0.1])]
  assert [r["i"] for r in submission.cut_per_video(rels, limit=3)] == [1, 0, 2]
  assert len(submission.cut_per_video(rels * 100, "vru20")) == 200
  assert len(submission.cut_per_video(rels * 600, "helper")) == 2000
  with pytest.raises(ValueError, match="unknown protocol"):
    submission.cut_per_video(rels, "vru21")


# ---------------------------------------------------------------- tracking
def _frames_two_objects(n, swap_gap=None):
  """Two objects moving towards each other and crossing; embeddings fixed."""
  out = []
  for t in range(n):
    boxes, embs = [], []
    for k, x in enumerate([5 + 6 * t, 95 - 6 * t]):
      if swap_gap and k == 0 and t in swap_gap:
        continue
      boxes.append([x, 40 + 20 * k, x + 10, 50 + 20 * k])
      embs.append(np.eye(4)[k])
    out.append(
      {
        "boxes": np.array(boxes, float).reshape(-1, 4),
        "scores": np.full(len(boxes), 0.9),
        "class_probs": np.eye(3)[[0, 1][: len(boxes)]] if len(boxes) == 2 else np.eye(3)[[1]],
        "embeddings": np.array(embs),
      }
    )
  return out


def test_tracker_links_crossing_objects_without_switches():
  tracks = tracking.link_detections(_frames_two_objects(16))
  assert len(tracks) == 2
  assert [tr.frames for tr in tracks] == [list(range(16))] * 2
  for tr, k in zip(tracks, [0, 1]):
    np.testing.assert_allclose(tr.embedding, np.eye(4)[k], atol=1e-9)
  np.testing.assert_allclose(tracks[0].category_distribution(), [1, 0, 0])


def test_tracker_bridges_short_gaps_and_splits_long_ones():
  cfg = tracking.TrackerConfig(max_misses=2)
  tracks = tracking.link_detections(_frames_two_objects(12, {4, 5}), cfg)
  assert len(tracks) == 2 and len(tracks[0].frames) == 10
  tracks = tracking.link_detections(_frames_two_objects(12, {4, 5, 6}), cfg)
  assert sorted(len(tr.frames) for tr in tracks) == [4, 5, 12]
  # min_length drops tracks with fewer observations.
  cfg = tracking.TrackerConfig(max_misses=2, min_length=5)
  tracks = tracking.link_detections(_frames_two_objects(12, {4, 5, 6}), cfg)
  assert sorted(len(tr.frames) for tr in tracks) == [5, 12]
  assert [tr.track_id for tr in tracks] == [0, 1]


def test_tracker_thresholds_drop_low_scores_and_duplicates():
  fr = _frames_two_objects(3)
  for f in fr:
    f["scores"] = np.array([0.9, 0.3])
  assert len(tracking.link_detections(fr)) == 1
  fr = _frames_two_objects(3)
  for f in fr:  # a near-duplicate of object 0 is suppressed by NMS
    f["boxes"] = np.concatenate([f["boxes"], f["boxes"][:1] + 0.5])
    f["scores"] = np.array([0.9, 0.9, 0.8])
    f["class_probs"] = np.eye(3)[[0, 1, 0]]
    f["embeddings"] = np.eye(4)[[0, 1, 0]]
  assert len(tracking.link_detections(fr)) == 2


# ---------------------------------------------------------------- metrics
def test_detection_ap_known_answer():
  frames = [
    {
      "gt_boxes": [[0, 0, 10, 10], [20, 20, 30, 30]],
      "gt_labels": [1, 2],
      "pred_boxes": [[0, 0, 10, 10], [0, 0, 10, 10], [21, 21, 31, 31], [50, 50, 60, 60]],
      "pred_labels": [1, 1, 2, 2],
      "pred_scores": [0.9, 0.8, 0.7, 0.95],
    },
    {
      "gt_boxes": [[0, 0, 10, 10]],
      "gt_labels": [1],
      "pred_boxes": np.zeros((0, 4)),
      "pred_labels": [],
      "pred_scores": [],
    },
  ]
  res = metrics.detection_ap(frames)
  # Class 1: TP (0.9), FP duplicate (0.8); 2 GT -> AP 0.5.
  # Class 2: FP (0.95) then TP (0.7, IoU 81/119 >= 0.5) -> AP 0.5.
  assert res["AP50_per_class"] == {1: 0.5, 2: 0.5}
  assert res["AP50"] == 0.5


def test_clear_mot_counts_an_id_switch():
  b1, b2 = [0, 0, 10, 10], [50, 0, 60, 10]
  frames = [
    {"gt_ids": [7, 8], "gt_boxes": [b1, b2], "track_ids": [0, 1], "track_boxes": [b1, b2]},
    {
      "gt_ids": [7, 8],
      "gt_boxes": [b1, b2],
      "track_ids": [0, 1],
      "track_boxes": [b1, [70, 0, 80, 10]],
    },  # FN + FP
    {"gt_ids": [7, 8], "gt_boxes": [b1, b2], "track_ids": [0, 2], "track_boxes": [b1, b2]},
  ]  # 8: 1 -> 2
  res = metrics.clear_mot(frames)
  assert (res["IDSW"], res["FP"], res["FN"], res["num_gt"]) == (1, 1, 1, 6)
  assert res["MOTA"] == pytest.approx(1 - 3 / 6)
