"""Submission validator: every problem at once, with video, index, field."""

from relations.video_relations.metrics import validate
from tests.video_relations.metrics.helpers import pred

NEXT = ("adult", "next_to", "dog")
SQ = [0, 0, 9, 9]


def _where(report, level):
  return sorted((p.video, p.index, p.field) for p in report.problems if p.level == level)


def test_reports_all_problems_at_once():
  bad_box = pred(NEXT, 0.5, (0, 2), SQ, SQ)
  bad_box["obj_traj"][1] = [0, 0, 9]
  sub = {
    "version": "VERSION 1.0",
    "results": {
      "1": [
        pred(NEXT, 0.9, (0, 2), SQ, SQ),
        {"triplet": list(NEXT), "score": "high", "duration": [0, 2], "sub_traj": [SQ, SQ]},
        bad_box,
      ],
      "2": [
        pred(("adult", "flies_over", "dog"), 0.1, (0, 2), SQ, SQ),
        pred(NEXT, float("nan"), (0, 3), SQ, [9, 9, 0, 0], n=2),
      ],
    },
  }
  rep = validate.validate_submission(sub, dataset="vidor")
  assert not rep.ok
  assert _where(rep, "error") == [("1", 1, "obj_traj"), ("1", 1, "score"), ("1", 2, "obj_traj")]
  assert _where(rep, "warning") == [
    ("2", 0, "triplet"),
    ("2", 1, "obj_traj"),
    ("2", 1, "obj_traj"),
    ("2", 1, "score"),
    ("2", 1, "sub_traj"),
  ]
  text = rep.summary()
  assert "video '1', prediction 1, field 'score': not a number: 'high'" in text
  assert "unknown predicate 'flies_over'" in text
  assert "2 boxes for a duration of 3 frames" in text
  assert "inverted" in text and "3 errors, 5 warnings" in text


def test_counts_over_the_limit_warn_per_protocol():
  many = {"version": "VERSION 1.0", "results": {"v": [pred(NEXT, 0.5, (0, 1), SQ, SQ)] * 201}}
  helper = validate.validate_submission(many, protocol="helper", dataset="")
  vru20 = validate.validate_submission(many, protocol="vru20", dataset="")
  assert helper.ok and not helper.problems
  assert vru20.ok and [str(p) for p in vru20.problems] == [
    "warning: video 'v': 201 predictions > 200 (the VRU'20 scorer keeps the top 200 by score)"
  ]


def test_version_results_and_ignored_videos():
  rep = validate.validate_submission({"results": []})
  assert [(p.level, p.field) for p in rep.problems] == [
    ("warning", "version"),
    ("error", "results"),
  ]
  sub = {
    "version": "VERSION 1.0",
    "results": {"x": [{"score": 1.0}], "y": [pred(NEXT, 1.0, (0, 1), SQ, SQ)]},
  }
  # Video x has no GT: the scorer never reads it, so no errors there.
  rep = validate.validate_submission(sub, groundtruth={"y": [1]}, dataset="vidor")
  assert rep.ok
  assert {p.video for p in rep.warnings} == {"x"}
  assert not validate.validate_submission(sub, dataset="vidor").ok
