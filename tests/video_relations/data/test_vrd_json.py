"""vrd_json: validation errors name file/record/field; the ground truth has
the official `get_relation_insts` format and values."""

import copy
import json

import numpy as np
import pytest

from relations.video_relations.data import annotations as vrd_json


def _box(x1, y1, x2, y2):
  return {"xmin": x1, "ymin": y1, "xmax": x2, "ymax": y2}


RAW = {
  "version": "VERSION 1.0",
  "video_id": "123",
  "video_hash": "ab",
  "video_path": "0001/123.mp4",
  "frame_count": 6,
  "fps": 29.97,
  "width": 64,
  "height": 48,
  "subject/objects": [{"tid": 4, "category": "dog"}, {"tid": 1, "category": "ball/sports_ball"}],
  "trajectories": [
    [{"tid": 4, "bbox": _box(1, 2, 10, 12), "generated": 0, "tracker": "none"}],
    [
      {"tid": 4, "bbox": _box(2, 2, 11, 12), "generated": 0},
      {"tid": 1, "bbox": _box(20.5, 5, 25, 9), "generated": 1, "tracker": "kcf"},
    ],
    [
      {"tid": 1, "bbox": _box(21, 5, 26, 9), "generated": 0},
      {"tid": 4, "bbox": _box(3, 2, 12, 12), "generated": 0},
    ],
    [{"tid": 4, "bbox": _box(4, 2, 13, 12), "generated": 1}],
  ],
  "relation_instances": [
    {"subject_tid": 4, "object_tid": 1, "predicate": "chase", "begin_fid": 1, "end_fid": 3},
    {
      "subject_tid": 1,
      "object_tid": 4,
      "predicate": "next_to",
      "begin_fid": 2,
      "end_fid": 6,
    },  # ends past the 4 annotated frames
  ],
}


def test_parse_known_values():
  a = vrd_json.parse_annotation(RAW, "x.json", dataset="vidor")
  assert (a.video_id, a.frame_count, a.num_annotated_frames) == ("123", 6, 4)
  np.testing.assert_array_equal(a.tids, [4, 1])
  assert a.categories == ("dog", "ball/sports_ball")
  np.testing.assert_array_equal(a.present, [[1, 0], [1, 1], [1, 1], [1, 0]])
  np.testing.assert_array_equal(a.generated, [[0, 0], [0, 1], [0, 0], [1, 0]])
  np.testing.assert_array_equal(a.boxes[1, 1], [20.5, 5, 25, 9])
  np.testing.assert_array_equal(a.boxes[2, 0], [3, 2, 12, 12])
  np.testing.assert_array_equal(a.boxes[0, 1], [0, 0, 0, 0])
  np.testing.assert_array_equal(a.subject, [0, 1])
  np.testing.assert_array_equal(a.object, [1, 0])
  assert a.predicates == ("chase", "next_to")
  np.testing.assert_array_equal(a.begin_fid, [1, 2])
  np.testing.assert_array_equal(a.end_fid, [3, 6])


def test_groundtruth_matches_official_format():
  raw = copy.deepcopy(RAW)
  raw["relation_instances"] = raw["relation_instances"][:1]
  gt = vrd_json.groundtruth_instances(raw, "x.json")
  assert gt == [
    {
      "triplet": ("dog", "chase", "ball/sports_ball"),
      "subject_tid": 4,
      "object_tid": 1,
      "duration": (1, 3),
      "sub_traj": [(2, 2, 11, 12), (3, 2, 12, 12)],
      "obj_traj": [(20.5, 5, 25, 9), (21, 5, 26, 9)],
    }
  ]
  # Numbers keep their JSON type, as in the official dict.
  assert isinstance(gt[0]["sub_traj"][0][0], int)
  assert isinstance(gt[0]["obj_traj"][0][0], float)


def test_groundtruth_missing_box_names_relation_frame_tid():
  with pytest.raises(
    vrd_json.AnnotationError,
    match=r"x.json: relation_instances\[1\]: frame 3 of "
    r"duration \[2, 6\) has no box for tid 1",
  ):
    vrd_json.groundtruth_instances(RAW, "x.json")


def test_groundtruth_short_trajectory_like_official():
  raw = copy.deepcopy(RAW)
  raw["trajectories"][3].append({"tid": 1, "bbox": _box(22, 5, 27, 9)})
  gt = vrd_json.groundtruth_instances(raw)
  # duration (2, 6) but only frames 2 and 3 exist: 2 boxes, as official.
  assert gt[1]["duration"] == (2, 6)
  assert gt[1]["sub_traj"] == [(21, 5, 26, 9), (22, 5, 27, 9)]
  assert gt[1]["obj_traj"] == [(3, 2, 12, 12), (4, 2, 13, 12)]


def _bad(edit, match, dataset="vidor", **kwargs):
  raw = copy.deepcopy(RAW)
  edit(raw)
  with pytest.raises(vrd_json.AnnotationError, match=match):
    vrd_json.parse_annotation(raw, "v.json", dataset=dataset, **kwargs)


def test_errors_name_file_record_field():
  _bad(lambda r: r.pop("fps"), r"v.json: missing field 'fps'")
  _bad(lambda r: r.update(frame_count="6"), r"v.json: field 'frame_count' must be int, got '6'")
  _bad(
    lambda r: r.update(version="VERSION 2.0"),
    r"v.json: field 'version' must be 'VERSION 1.0' for VidOR",
  )
  _bad(
    lambda r: None,
    r"v.json: ImageNet-VidVRD annotations have no "
    "'version' field",
    dataset="vidvrd",
  )
  _bad(
    lambda r: r["subject/objects"].append({"tid": 4, "category": "cat"}),
    r"v.json: subject/objects\[2\]: duplicate tid 4",
  )
  _bad(
    lambda r: r["trajectories"][2][1].update(tid=9),
    r"v.json: trajectories\[2\]\[1\]: tid 9 is not in subject/objects",
  )
  _bad(
    lambda r: r["trajectories"][1].append({"tid": 4, "bbox": _box(0, 0, 1, 1)}),
    r"v.json: trajectories\[1\]\[2\]: second box for tid 4 in frame 1",
  )
  _bad(
    lambda r: r["trajectories"][0][0]["bbox"].update(xmin=11),
    r"v.json: trajectories\[0\]\[0\].bbox: inverted box",
  )
  _bad(
    lambda r: r["trajectories"][0][0]["bbox"].update(ymax=float("nan")),
    r"v.json: trajectories\[0\]\[0\].bbox: field 'ymax' is not finite",
  )
  _bad(
    lambda r: r["trajectories"][0][0].update(generated=2),
    r"v.json: trajectories\[0\]\[0\]: field 'generated' must be 0 or 1",
  )
  _bad(
    lambda r: r["relation_instances"][1].update(object_tid=7),
    r"v.json: relation_instances\[1\]: field 'object_tid' 7 is not in "
    "subject/objects",
  )
  _bad(
    lambda r: r["relation_instances"][0].update(end_fid=1),
    r"v.json: relation_instances\[0\]: need 0 <= begin_fid < end_fid, got "
    "begin_fid=1 end_fid=1",
  )
  _bad(
    lambda r: r["relation_instances"][0].update(predicate="chases"),
    r"v.json: relation_instances\[0\]: field 'predicate' 'chases' is not a "
    "known predicate",
    predicates=["chase", "next_to"],
  )
  _bad(
    lambda r: r["relation_instances"][0].update(begin_fid=True),
    r"v.json: relation_instances\[0\]: field 'begin_fid' must be int",
  )
  # Tids and frame indices are held in int64 arrays.
  _bad(
    lambda r: r["relation_instances"][0].update(end_fid=2**63),
    r"v.json: relation_instances\[0\]: field 'end_fid' is out of the int64 range: "
    "9223372036854775808",
  )
  _bad(
    lambda r: r["subject/objects"][0].update(tid=-(2**63) - 1),
    r"v.json: subject/objects\[0\]: field 'tid' is out of the int64 range",
  )


def test_malformed_json_names_file(tmp_path):
  path = tmp_path / "123.json"
  path.write_text(json.dumps(RAW)[:-3])
  with pytest.raises(vrd_json.AnnotationError, match=f"{path}: malformed JSON"):
    vrd_json.read_annotation(path)


def _good_raw():
  raw = copy.deepcopy(RAW)
  raw["trajectories"][3].append({"tid": 1, "bbox": _box(22, 5, 27, 9)})
  return raw


def test_load_groundtruth_folder_file_and_json_round_trip(tmp_path):
  raw_a, raw_b = _good_raw(), _good_raw()
  raw_b["video_id"] = "456"
  raw_b["relation_instances"] = []
  for group, raw in (("0001", raw_a), ("0002", raw_b)):
    (tmp_path / "ann" / group).mkdir(parents=True)
    (tmp_path / "ann" / group / f"{raw['video_id']}.json").write_text(json.dumps(raw))
  gt = vrd_json.load_groundtruth(tmp_path / "ann", dataset="vidor")
  assert list(gt) == ["123", "456"]
  assert gt["456"] == []
  assert gt["123"] == vrd_json.groundtruth_instances(raw_a)
  single = vrd_json.load_groundtruth(tmp_path / "ann/0001/123.json")
  assert single == {"123": gt["123"]}
  # The consolidated JSON (what `python -m dataset.vidor ... relation`
  # writes) reads back to the same dict, tuples restored.
  (tmp_path / "gt.json").write_text(json.dumps(gt))
  assert vrd_json.load_groundtruth(tmp_path / "gt.json") == gt


def test_load_groundtruth_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such file or folder"):
    vrd_json.load_groundtruth(tmp_path / "missing")
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError, match="no \\*.json annotation"):
    vrd_json.load_groundtruth(tmp_path / "empty")
  for name in ("a", "b"):
    (tmp_path / "dup" / name).mkdir(parents=True)
    (tmp_path / "dup" / name / "123.json").write_text(json.dumps(_good_raw()))
  with pytest.raises(
    vrd_json.AnnotationError, match=r"b/123.json: video_id 123 also in .*a/123.json"
  ):
    vrd_json.load_groundtruth(tmp_path / "dup")
  bad = {
    "v": [
      {
        "triplet": ["a", "b"],
        "subject_tid": 0,
        "object_tid": 1,
        "duration": [0, 1],
        "sub_traj": [],
        "obj_traj": [],
      }
    ]
  }
  (tmp_path / "gt.json").write_text(json.dumps(bad))
  with pytest.raises(
    vrd_json.AnnotationError,
    match=r"gt.json: video v\[0\]: field 'triplet' must be "
    "3 strings",
  ):
    vrd_json.load_groundtruth(tmp_path / "gt.json")
