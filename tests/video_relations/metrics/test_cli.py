"""`python -m relations.evaluate video_relations ...` end to end on files."""

import glob
import json
import lzma
import threading

import numpy as np
import pytest

from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.metrics import cli as vidor_cli
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import fastjson as vrd_fastjson
from relations.video_relations.metrics import io as vrd_io
from tests.video_relations.metrics.helpers import assert_same_table, gt, pred

NEXT = ("adult", "next_to", "dog")
BEHIND = ("adult", "behind", "dog")
SQ, FAR = [0, 0, 9, 9], [20, 0, 29, 9]


def _gt_json(d):
  return {
    v: [dict(r, triplet=list(r["triplet"]), duration=list(r["duration"])) for r in rels]
    for v, rels in d.items()
  }


@pytest.fixture
def files(tmp_path):
  g = {
    "1": [gt(NEXT, (0, 2), SQ, FAR), gt(BEHIND, (0, 2), SQ, FAR)],
    "2": [gt(NEXT, (0, 2), SQ, FAR)],
  }
  train = {"9": [gt(NEXT, (0, 2), SQ, FAR)]}
  sub = {
    "version": "VERSION 1.0",
    "results": {
      "1": [pred(NEXT, 0.9, (0, 2), SQ, FAR), pred(BEHIND, 0.8, (0, 2), SQ, FAR)],
      "2": [pred(BEHIND, 0.9, (0, 2), SQ, FAR), pred(NEXT, 0.5, (0, 2), SQ, FAR)],
    },
  }
  (tmp_path / "gt.json").write_text(json.dumps(_gt_json(g)))
  (tmp_path / "train.json").write_text(json.dumps(_gt_json(train)))
  with lzma.open(tmp_path / "sub.json.xz", "wt") as f:
    json.dump(sub, f)
  return tmp_path


def test_metrics_json(files, capsys):
  out = files / "m" / "metrics.json"
  rc = vidor_cli.main(
    [
      "--groundtruth",
      str(files / "gt.json"),
      "--prediction",
      str(files / "sub.json.xz"),
      "--zero-shot",
      str(files / "train.json"),
      "--per-video",
      "--output",
      str(out),
    ]
  )
  assert rc == 0
  m = json.loads(out.read_text())
  # Video 1: both TP -> AP 1; video 2: FP then TP -> AP 0.5.
  assert m["per_video_ap"] == {"1": 1.0, "2": 0.5}
  assert (m["mAP"], m["R@50"], m["R@100"]) == (0.75, 1.0, 1.0)
  assert (m["P@1"], m["P@5"], m["P@10"]) == (0.5, 0.75, 0.75)
  # Zero-shot triplet: BEHIND (video 1 only). Filtered predictions: one TP;
  # generalized: NEXT (0.9) ranks first as an FP.
  assert m["zero_shot"]["mAP"] == 1.0
  assert m["generalized_zero_shot"]["mAP"] == 0.5
  assert m["num_zero_shot_triplets"] == 1
  assert "mAP" in capsys.readouterr().out
  assert not list(out.parent.glob(".tmp_*"))


def test_vru20_protocol_and_plain_json(files):
  sub = json.loads(lzma.open(files / "sub.json.xz", "rt").read())
  (files / "sub.json").write_text(json.dumps(sub))
  out = files / "vru.json"
  assert (
    vidor_cli.main(
      [
        "--groundtruth",
        str(files / "gt.json"),
        "--prediction",
        str(files / "sub.json"),
        "--protocol",
        "vru20",
        "--output",
        str(out),
      ]
    )
    == 0
  )
  assert json.loads(out.read_text())["mAP"] == 0.75


def test_format_errors_refuse_with_all_problems(files, capsys):
  bad = {
    "version": "VERSION 1.0",
    "results": {"1": [{"triplet": list(NEXT)}, pred(NEXT, "x", (0, 2), SQ, FAR)]},
  }
  (files / "bad.json").write_text(json.dumps(bad))
  rc = vidor_cli.main(
    ["--groundtruth", str(files / "gt.json"), "--prediction", str(files / "bad.json")]
  )
  err = capsys.readouterr().err
  assert rc == 1
  for field in ("score", "duration", "sub_traj", "obj_traj"):
    assert f"video '1', prediction 0, field '{field}': missing" in err
  assert "video '1', prediction 1, field 'score': not a number" in err


def test_unreadable_files_name_the_file(files, capsys):
  (files / "broken.json").write_text("{\"results\": [")
  assert (
    vidor_cli.main(
      ["--groundtruth", str(files / "gt.json"), "--prediction", str(files / "broken.json")]
    )
    == 2
  )
  assert "broken.json: malformed JSON" in capsys.readouterr().err
  assert (
    vidor_cli.main(
      ["--groundtruth", str(files / "nope"), "--prediction", str(files / "sub.json.xz")]
    )
    == 2
  )


def test_unscorable_submission_is_refused_with_location(files, capsys):
  sub = {"version": "VERSION 1.0", "results": {"1": [pred(NEXT, 0.9, (0, 2), SQ, FAR, n=1)]}}
  (files / "short.json").write_text(json.dumps(sub))
  assert (
    vidor_cli.main(
      ["--groundtruth", str(files / "gt.json"), "--prediction", str(files / "short.json")]
    )
    == 1
  )
  err = capsys.readouterr().err
  assert "1 boxes for a duration of 2 frames" in err  # the warning
  assert "video '1', prediction 0, field 'sub_traj'" in err  # the refusal


def _annotation(vid, dataset):
  """A small official annotation file (VidOR or VidVRD flavour)."""
  box = lambda x: {"xmin": x, "ymin": 0, "xmax": x + 9, "ymax": 9}
  raw = {
    "video_id": vid,
    "frame_count": 2,
    "fps": 30,
    "width": 64,
    "height": 48,
    "subject/objects": [
      {"tid": 0, "category": "dog"},
      {"tid": 1, "category": "ball/sports_ball" if dataset == "vidor" else "zebra"},
    ],
    "trajectories": [[{"tid": 0, "bbox": box(0)}, {"tid": 1, "bbox": box(20)}]] * 2,
    "relation_instances": [
      {"subject_tid": 0, "object_tid": 1, "predicate": "chase", "begin_fid": 0, "end_fid": 2}
    ],
  }
  if dataset == "vidor":
    raw.update(version="VERSION 1.0", video_hash="h", video_path=f"x/{vid}.mp4")
  return raw


@pytest.mark.parametrize("dataset", ["vidor", "vidvrd"])
def test_annotation_folder_is_read_in_official_glob_order(tmp_path, dataset):
  # The official loaders glob the split folder (directory order, not
  # sorted); the GT dict order is the mAP's summation order.
  names = ["b", "a", "10", "9", "c", "07", "x1", "2"]
  expected = []
  for g, group in enumerate(("0002", "0001", "0010")):
    folder = tmp_path / group if dataset == "vidor" else tmp_path
    folder.mkdir(exist_ok=True)
    for n in names:
      vid = f"{n}{g}" if dataset == "vidor" else f"ILSVRC2015_train_{n}{g}"
      (folder / f"{vid}.json").write_text(json.dumps(_annotation(vid, dataset)))
  pattern = "*/*.json" if dataset == "vidor" else "*.json"
  expected = [json.loads(open(f).read())["video_id"] for f in glob.glob(str(tmp_path / pattern))]
  got = vrd_io.load_groundtruth(str(tmp_path))
  assert list(got) == expected
  assert list(vrd_io.load_groundtruth(str(tmp_path), dataset)) == expected
  assert sorted(expected) == sorted(got) and len(got) == 3 * len(names)
  assert got[expected[0]][0]["triplet"] == (
    "dog",
    "chase",
    "ball/sports_ball" if dataset == "vidor" else "zebra",
  )


def test_annotation_folder_errors(tmp_path):
  with pytest.raises(
    FileNotFoundError,
    match=r"no annotation files at .*"
    r"\*\.json \(official vidvrd layout\)",
  ):
    vrd_io.load_groundtruth(str(tmp_path), "vidvrd")
  (tmp_path / "g").mkdir()
  (tmp_path / "g" / "1.json").write_text(json.dumps(_annotation("1", "vidor")))
  (tmp_path / "ILSVRC2015_train_1.json").write_text(
    json.dumps(_annotation("ILSVRC2015_train_1", "vidvrd"))
  )
  with pytest.raises(vrd_json.AnnotationError, match="holds both"):
    vrd_io.load_groundtruth(str(tmp_path))
  assert list(vrd_io.load_groundtruth(str(tmp_path), "vidor")) == ["1"]


_GT_REL = (
  '{"triplet": ["adult", "next_to", "dog"], "subject_tid": 0, '
  '"object_tid": 1, "duration": [0, 2], "sub_traj": [[0, 0, 9, 9], '
  '[0, 0, 9, 9]], "obj_traj": [[20, 0, 29, 9], [20, 0, 29, 9]]}'
)


@pytest.mark.parametrize(
  "text",
  [
    '{"1": [' + _GT_REL + '], "2": [], "3": [' + _GT_REL + ", " + _GT_REL + "]}",
    '{"1": [' + _GT_REL.replace('"subject_tid": 0, ', "") + "]}",
    '{"1": [' + _GT_REL.replace('"subject_tid": 0', '"subject_tid": true') + "]}",
    '{"1": [' + _GT_REL.replace('"subject_tid": 0', '"subject_tid": 0.0') + "]}",
    '{"1": [' + _GT_REL.replace("[0, 2]", "[0.0, 2]") + "]}",
    '{"1": [' + _GT_REL.replace("[0, 0, 9, 9]", "[0, 0, 9]", 1) + "]}",
    '{"1": [' + _GT_REL.replace('"dog"]', '"dog", "x"]') + "]}",
    '{"1": [' + _GT_REL.replace("[0, 0, 9, 9]", "[0, NaN, 9, 9]", 1) + "]}",
    '{"1": [' + _GT_REL.replace('"duration"', '"score": 1, "duration"') + "]}",
    '{"1": ['
    + _GT_REL.replace('"duration": [0, 2]', '"duration": [0, 1], "duration": [0, 2]')
    + "]}",
    '{"1": [' + _GT_REL.replace("[0, 0, 9, 9]", "[0, 0, 9, 12345678901234567890]", 1) + "]}",
    '{"1": 5, "2": [' + _GT_REL + "]}",
    '{"1": [5], "1": [' + _GT_REL + "]}",
    '{"1": [' + _GT_REL + '], "2": [], "1": [5]}',
    "[1, 2]",
    '{"1": [' + _GT_REL + "]",
    '{"video_id": "1", "trajectories": []}',
    '{"video_id": "1", "subject/objects": []}',  # no "trajectories"
    '{"1": [' + _GT_REL.replace('"subject_tid": 0', '"subject_tid": ' + "9" * 5000) + "]}",
    '{"1": ['
    + _GT_REL.replace('"subject_tid": 0', '"subject_tid": -' + "9" * 4300)
    + "]}",  # at the limit: read
    '{"1": [' + _GT_REL.replace('"dog"]', '"martian"]') + "]}",
  ],
)
@pytest.mark.parametrize("cut", [False, True])
def test_groundtruth_table_equals_the_dict_loader(tmp_path, monkeypatch, text, cut):
  # The CLI's GT reader: the dict loader's table, or its exact error; also with every
  # document cut for two threads (its boxes then shared by both halves).
  if cut:
    monkeypatch.setattr(vrd_fastjson, "SPLIT_MIN", 1)
    monkeypatch.setattr(vrd_fastjson, "MAX_MISSES", 10**9)
  path = tmp_path / "gt.json"
  path.write_text(text)
  try:
    want = columns.RelationTable.from_dicts(vrd_io.load_groundtruth(str(path)))
  except vrd_json.AnnotationError as e:
    with pytest.raises(vrd_json.AnnotationError) as got:
      vrd_io.read_groundtruth_table(str(path))
    for what in ("malformed JSON", "unreadable JSON value"):
      if what in str(e):  # the scanner says where, not what json.loads says
        assert str(got.value).startswith(f"{path}: {what}: ")
        break
    else:
      assert str(got.value) == str(e)
    return
  assert_same_table(vrd_io.read_groundtruth_table(str(path)), want)


def test_groundtruth_file_is_read_in_two_threads_into_one_box_array(tmp_path, monkeypatch):
  # A consolidated GT is one mapped window: its halves are scanned in two threads, and both
  # write their boxes into one array, which the table keeps (no copy of the boxes).
  monkeypatch.setattr(vrd_fastjson, "SPLIT_MIN", 1)
  monkeypatch.setattr(vrd_fastjson.os, "sched_getaffinity", lambda _: {0, 1})
  heads = []
  real = vrd_fastjson.json_scan.scan_window

  def spy(*args):
    heads.append((threading.current_thread().name.startswith("scan_head"), args[-2]))
    return real(*args)

  monkeypatch.setattr(vrd_fastjson.json_scan, "scan_window", spy)
  rel = lambda k: _GT_REL.replace("[0, 0, 9, 9]", f"[{k}, 0, 9, 9]").replace('"dog"', f'"d{k % 7}"')
  text = "{" + ", ".join(f'"{v}": [{rel(v)}, {rel(v + 1000)}]' for v in range(40)) + "}"
  path = tmp_path / "gt.json"
  path.write_text(text)
  got = vrd_io.read_groundtruth_table(str(path))
  assert [h for h, _ in heads] == [True, False]  # a head and a tail, kept
  head_boxes, tail_boxes = (b for _, b in heads)
  assert head_boxes.base is tail_boxes.base is not None  # one array, the tail past the head's
  assert tail_boxes.ctypes.data == head_boxes.ctypes.data + head_boxes.nbytes
  assert got.boxes.base is head_boxes.base
  want = columns.RelationTable.from_dicts(json.loads(text))
  assert want.video_ids == [str(v) for v in range(40)]
  assert_same_table(got, want)
  assert got.offset.max() > len(want.boxes)  # the tail's boxes sit past a gap


@pytest.mark.parametrize(
  "text",
  [
    '{"1": [' + _GT_REL + '], "2": [' + _GT_REL.replace('"dog"]', '"martian"]') + "]}",
    '{"1": [' + _GT_REL.replace('"next_to"', '"next_to_x"') + "]}",
    '{"1": ['
    + _GT_REL.replace('"adult"', '"Adult"').replace('"subject_tid": 0', '"subject_tid": 0.0')
    + "]}",  # irregular too
    '{"1": ['
    + _GT_REL.replace('"adult"', '"martian"')
    + ", "
    + _GT_REL.replace('"adult"', '"sc\\u0068ool"')
    + "]}",
    '{"1": [' + _GT_REL + "]}",
  ],
)
@pytest.mark.parametrize("dataset", ["vidor", "vidvrd"])
def test_groundtruth_table_checks_the_dataset_names(tmp_path, text, dataset):
  # --dataset: the names of a consolidated GT JSON are checked as
  # load_groundtruth checks them (same first error).
  path = tmp_path / "gt.json"
  path.write_text(text)
  try:
    want = list(vrd_io.load_groundtruth(str(path), dataset))
  except vrd_json.AnnotationError as e:
    with pytest.raises(vrd_json.AnnotationError) as got:
      vrd_io.read_groundtruth_table(str(path), dataset)
    assert str(got.value) == str(e) and f"not a known {dataset}" in str(e)
    return
  assert vrd_io.read_groundtruth_table(str(path), dataset).video_ids == want


def test_groundtruth_table_hostile_json(tmp_path):
  path = tmp_path / "gt.json"
  path.write_text("[" * 5000 + "]" * 5000)
  with pytest.raises(
    vrd_json.AnnotationError,
    match=r"gt\.json: JSON nested too "
    "deeply: nesting deeper than 4096 levels",
  ):
    vrd_io.read_groundtruth_table(str(path))
  path.write_text('{"1": [], "2": {"x": [1, -' + "9" * 4301 + "]}}")
  with pytest.raises(
    vrd_json.AnnotationError,
    match=r"gt\.json: unreadable JSON "
    r"value: an integer of more than 4300 digits .* at byte 25 ",
  ):
    vrd_io.read_groundtruth_table(str(path))
  with pytest.raises(vrd_json.AnnotationError, match="unreadable JSON value"):
    vrd_io.load_groundtruth(str(path))


@pytest.mark.parametrize("dataset", ["vidor", "vidvrd"])
def test_groundtruth_table_of_an_annotation_folder(tmp_path, dataset):
  for g, group in enumerate(("0002", "0001")):
    folder = tmp_path / group if dataset == "vidor" else tmp_path
    folder.mkdir(exist_ok=True)
    for n in ("b", "a", "10"):
      vid = f"{n}{g}" if dataset == "vidor" else f"ILSVRC2015_train_{n}{g}"
      (folder / f"{vid}.json").write_text(json.dumps(_annotation(vid, dataset)))
  want = columns.RelationTable.from_dicts(vrd_io.load_groundtruth(str(tmp_path)))
  got = vrd_io.read_groundtruth_table(str(tmp_path))
  assert got.video_ids == want.video_ids and got.triplets == want.triplets
  np.testing.assert_array_equal(got.boxes, want.boxes)
  np.testing.assert_array_equal(got.offset, want.offset)
  train = vrd_io.read_groundtruth_table(str(tmp_path), keep_boxes=False)
  assert train.triplets == want.triplets and len(train.boxes) == 0


@pytest.mark.parametrize(
  "text",
  [
    '{}',
    ' {\n} ',
    '{"results": {}}',
    '{"results": {"a": [], "b": [1, 2]}, "version": "V"}',
    '{"results": [1]}',
    '[1, 2]',
    '{"a": NaN, "results": {"v": [{"s": Infinity}]}}',
    '{\n "results" : {\n  "v\\u00e9" : [ ] ,\n  "w": {"x": {"x": 1, "x": 2}} } }\n',
  ],
)
def test_submission_reader_equals_json_loads(text):
  dups = []
  assert json.dumps(vrd_io._loads_submission(text, dups)) == json.dumps(json.loads(text))
  assert dups == []  # duplicates below the video level are not the reader's business


@pytest.mark.parametrize(
  "text", ['{"results": {"a": [] "b": []}}', '{"results": {"a": []}} x', '{"a" 1}', '{"a": [1,}']
)
def test_submission_reader_errors_equal_json_loads(text):
  with pytest.raises(json.JSONDecodeError) as ours:
    vrd_io._loads_submission(text, [])
  with pytest.raises(json.JSONDecodeError) as theirs:
    json.loads(text)
  assert str(ours.value) == str(theirs.value)


def test_duplicated_video_is_refused(tmp_path, capsys):
  one = json.dumps([pred(NEXT, 0.9, (0, 2), SQ, FAR)])
  path = tmp_path / "dup.json"
  path.write_text('{"version": "VERSION 1.0", "results": {"1": %s, "2": [], "1": %s}}' % (one, one))
  with pytest.raises(
    vrd_io.SubmissionError,
    match=r"dup\.json: video '1' appears more than "
    r"once \(1 duplicated key\(s\)\)",
  ):
    vrd_io.load_submission(str(path))
  (tmp_path / "gt.json").write_text(json.dumps(_gt_json({"1": [gt(NEXT, (0, 2), SQ, FAR)]})))
  argv = ["--groundtruth", str(tmp_path / "gt.json"), "--prediction", str(path)]
  assert vidor_cli.main(argv) == 2  # the CLI's columnar reader agrees
  assert (
    "dup.json: video '1' appears more than once (1 duplicated key(s))" in capsys.readouterr().err
  )
  path.write_text('{"results": {}, "results": {}}')
  with pytest.raises(vrd_io.SubmissionError, match="key 'results' appears more than once"):
    vrd_io.load_submission(str(path))
  assert vidor_cli.main(argv) == 2
  assert "dup.json: key 'results' appears more than once" in capsys.readouterr().err


_ONE = json.dumps([pred(NEXT, 0.9, (0, 2), SQ, FAR)])


@pytest.mark.parametrize(
  "text",
  [
    '{"results": {"1": ' + _ONE + ', "2": [], "1": ' + _ONE + ', "2": 5, "1": []}}',
    '{"results": {"1": []}, "version": "V", "results": {"2": [], "2": ' + _ONE + "}}",
    '{"results": {"1": [], "1": []}, "results": 3, "version": 1, "version": 2}',
    ('{"version": "V", "results": {"v\\u0031": [], "v1": []}, "x": {"a": 1, "a": 2}}'),
    '{"results": {"1": ' + _ONE + ', "2": ' + _ONE + '}, "version": "V"}',
    '{"results": {"1": {"1": 1, "1": 2}}}',
    '{"results": [], "results": []}',
    '{"1": [], "results": {"1": []}, "1": []}',
  ],
)
def test_columnar_reader_refuses_duplicates_as_load_submission(tmp_path, text):
  # Same refusal (first key named, count) as the dict reader, whatever the
  # windows; duplicates below the video level are accepted by both.
  path = tmp_path / "s.json"
  path.write_text(text)
  try:
    vrd_io.load_submission(str(path))
    want = None
  except vrd_io.SubmissionError as e:
    want = str(e)
  for window in (None, 17):
    try:
      for _ in vrd_fastjson.scan_document(str(path), window=window, unique_keys=True):
        pass
      got = None
    except vrd_fastjson.FormatError as e:
      assert e.kind == "duplicate"
      got = e.message(str(path))
    assert got == want
  assert want is None or "more than once" in want


@pytest.mark.parametrize(
  "text,words",
  [
    (
      '{"results": {"1": [], "x": ' + "9" * 5000 + "}}",
      "unreadable JSON value: an integer of more than 4300 digits",
    ),
    (
      '{"version": -' + "1" * 4301 + ', "results": {}}',
      "unreadable JSON value: an integer of more than 4300 digits",
    ),
    (
      '{"results": {"1": ['
      + json.dumps(pred(NEXT, 0.9, (0, 2), SQ, FAR)).replace("0.9", "9" * 4301)
      + "]}}",
      "unreadable JSON value",
    ),
    ("[" * 5000 + "]" * 5000, "JSON nested too deeply: nesting deeper than 4096"),
  ],
)
def test_cli_refuses_what_json_loads_cannot_read(tmp_path, capsys, text, words):
  path = tmp_path / "s.json"
  path.write_text(text)
  with pytest.raises(vrd_io.SubmissionError):
    vrd_io.load_submission(str(path))
  (tmp_path / "gt.json").write_text(json.dumps(_gt_json({"1": [gt(NEXT, (0, 2), SQ, FAR)]})))
  assert (
    vidor_cli.main(["--groundtruth", str(tmp_path / "gt.json"), "--prediction", str(path)]) == 2
  )
  err = capsys.readouterr().err
  assert f"error: {path}: {words}" in err and "Traceback" not in err


def test_cli_reads_an_integer_at_the_digit_limit(tmp_path, capsys):
  # 4300 digits: json.loads reads it; the validator judges the value.
  path = tmp_path / "s.json"
  path.write_text('{"results": {"1": ' + "9" * 4300 + "}}")
  vrd_io.load_submission(str(path))
  (tmp_path / "gt.json").write_text(json.dumps(_gt_json({"1": [gt(NEXT, (0, 2), SQ, FAR)]})))
  assert (
    vidor_cli.main(["--groundtruth", str(tmp_path / "gt.json"), "--prediction", str(path)]) == 1
  )
  err = capsys.readouterr().err
  assert "video '1': predictions must be a list" in err and "format errors; not scored" in err
