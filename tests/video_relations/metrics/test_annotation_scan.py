"""The compiled reader of one annotation file against the checking dict reader.

`annotation_scan.groundtruth_table(f)` must give exactly `RelationTable.from_dicts(
annotations.load_groundtruth(f))` or None (then the CLI reads the file with the dict reader, whose
error or result stands); it must never accept what the dict reader refuses. Checked on plain
files of both flavours, on hand-made irregular ones, and on a few thousand seeded mutations
(field values swapped for other types and edge values, fields dropped or repeated, keys escaped,
bytes cut and inserted).
"""

import copy
import json
import random

import numpy as np
import pytest

from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.metrics import annotation_scan
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import io as vrd_io


def _annotation(dataset, frames=4):
  box = lambda x, f: {"xmin": x + f, "ymin": 0.5, "xmax": x + f + 9, "ymax": 9}
  raw = {
    "video_id": "v1",
    "frame_count": frames,
    "fps": 29.97,
    "width": 64,
    "height": 48,
    "subject/objects": [
      {"tid": 3, "category": "dog"},
      {"tid": 1, "category": "ball/sports_ball" if dataset == "vidor" else "zebra"},
      {"tid": 7, "category": "dog"},
    ],
    "trajectories": [
      [
        {"tid": 3, "bbox": box(0, f), "generated": 0, "tracker": "none"},
        {"tid": 1, "bbox": box(20, f), "generated": 1, "tracker": "linear"},
      ]
      + ([{"tid": 7, "bbox": box(40, f)}] if f >= 2 else [])
      for f in range(frames)
    ],
    "relation_instances": [
      {"subject_tid": 3, "object_tid": 1, "predicate": "chase", "begin_fid": 0, "end_fid": 3},
      {"subject_tid": 7, "object_tid": 3, "predicate": "chase", "begin_fid": 2, "end_fid": 9},
      {"subject_tid": 1, "object_tid": 7, "predicate": "bite", "begin_fid": 3, "end_fid": 4},
    ],
  }
  if dataset == "vidor":
    raw.update(version="VERSION 1.0", video_hash="h", video_path="x/v1.mp4")
  return raw


def _want(path, dataset):
  try:
    return columns.RelationTable.from_dicts(vrd_json.load_groundtruth(str(path), dataset))
  except vrd_json.AnnotationError:
    return None


def _check(path, dataset):
  """Asserts the contract; returns whether the compiled reader took the file."""
  want = _want(path, dataset)
  got = annotation_scan.groundtruth_table(str(path), dataset)
  if got is None:
    return False
  assert want is not None, f"accepted what the dict reader refuses: {path.read_bytes()[:300]!r}"
  vid, table = got
  assert [vid] == want.video_ids == table.video_ids
  assert table.triplets == want.triplets and table.exact_ints == want.exact_ints
  for name in ("bounds", "triplet", "score", "duration", "flags", "boxes", "offset", "length"):
    a, b = getattr(table, name), getattr(want, name)
    assert a.dtype == b.dtype and a.shape == b.shape, name
    np.testing.assert_array_equal(a, b, err_msg=name)
  return True


@pytest.mark.parametrize("dataset", ["vidor", "vidvrd", None])
@pytest.mark.parametrize("indent", [None, 2])
def test_plain_files_equal_the_dict_reader(tmp_path, dataset, indent):
  raw = _annotation(dataset or "vidor")
  path = tmp_path / "a.json"
  path.write_text(json.dumps(raw, indent=indent))
  assert _check(path, dataset)
  table = annotation_scan.groundtruth_table(str(path), dataset)[1]
  # The second relation runs past the 4 annotated frames: the official slice keeps 2 boxes.
  assert table.length.tolist() == [[3, 3], [2, 2], [1, 1]]
  assert table.duration.tolist() == [[0, 3], [2, 9], [3, 4]]


def _set(path_keys, value):
  def f(raw):
    node = raw
    for k in path_keys[:-1]:
      node = node[k]
    if value is _DROP:
      if isinstance(node, list) or path_keys[-1] in node:
        del node[path_keys[-1]]
    else:
      node[path_keys[-1]] = value

  return f


_DROP = object()
_ODD = [
  None,
  True,
  False,
  0,
  1,
  -1,
  2,
  1.0,
  0.5,
  -0.0,
  1e308,
  10**20,
  "",
  "x",
  "VERSION 1.0",
  [],
  {},
]
_FIELDS = [
  ("version",),
  ("video_id",),
  ("frame_count",),
  ("fps",),
  ("width",),
  ("height",),
  ("video_path",),
  ("subject/objects",),
  ("trajectories",),
  ("relation_instances",),
  ("subject/objects", 0, "tid"),
  ("subject/objects", 1, "category"),
  ("subject/objects", 2),
  ("trajectories", 0),
  ("trajectories", 1, 0),
  ("trajectories", 2, 1, "tid"),
  ("trajectories", 2, 2, "bbox"),
  ("trajectories", 1, 1, "generated"),
  ("trajectories", 3, 0, "tracker"),
  ("trajectories", 3, 0, "bbox", "xmin"),
  ("trajectories", 0, 1, "bbox", "ymax"),
  ("relation_instances", 0, "subject_tid"),
  ("relation_instances", 1, "object_tid"),
  ("relation_instances", 2, "predicate"),
  ("relation_instances", 0, "begin_fid"),
  ("relation_instances", 1, "end_fid"),
  ("relation_instances", 2),
]


@pytest.mark.parametrize("dataset", ["vidor", "vidvrd", None])
def test_every_field_with_odd_values(tmp_path, dataset):
  base = _annotation(dataset or "vidor")
  taken = 0
  path = tmp_path / "a.json"
  for field in _FIELDS:
    for value in _ODD + [_DROP]:
      raw = copy.deepcopy(base)
      _set(field, value)(raw)
      path.write_text(json.dumps(raw))
      taken += _check(path, dataset)
  assert taken > 20  # some variants stay plain (e.g. another tracker, video_path null)


_BOX = '{{"tid": {}, "bbox": {{"xmin": 5, "ymin": 0.5, "xmax": 50, "ymax": 9}}}}'
_EDITS = [
  lambda t: t.replace('"tid": 7', '"tid": 1', 1),  # 0: a repeated object tid
  lambda t: t.replace('{"tid": 7, "bbox"', '{"tid": 9, "bbox"', 1),  # a box of an unknown tid
  lambda t: t.replace('{"tid": 1, "bbox"', '{"tid": 3, "bbox"', 1),  # two boxes of one tid
  lambda t: t.replace('"xmin": 0', '"xmin": 100', 1),  # inverted box
  lambda t: t.replace('"xmin": 0', '"xmin": NaN', 1),
  lambda t: t.replace('"xmin": 0', '"xmin": Infinity', 1),
  lambda t: t.replace('"ymin": 0.5', '"ymin": 5e-1', 1),  # plain: another spelling of 0.5
  lambda t: t.replace('"ymin": 0.5', '"ymin": 0.50000000000000000001', 1),
  lambda t: t.replace('"xmax": 9', '"xmax": 9.0', 1),
  lambda t: t.replace('"tid": 3', '"tid": 3.0', 1),
  lambda t: t.replace('"tid": 3', '"tid": 1e0', 1),
  lambda t: t.replace('"tid": 3', '"tid": -0', 1),
  lambda t: t.replace('"end_fid": 3', '"end_fid": 0', 1),  # begin >= end
  lambda t: t.replace('"begin_fid": 2', '"begin_fid": -1', 1),
  lambda t: t.replace('"begin_fid": 2', '"begin_fid": 1', 1),  # frame 1 has no tid 7
  lambda t: t.replace('"fps": 29.97', '"fps": 0', 1),
  lambda t: t.replace('"width": 64', '"width": 0', 1),
  lambda t: t.replace('"frame_count": 4', '"frame_count": -1', 1),
  lambda t: t.replace('"video_id"', '"vide\\u006f_id"', 1),  # escaped key
  lambda t: t.replace('"predicate": "chase"', '"predicate": "ch\\u0061se"', 1),  # escaped value
  lambda t: t.replace('"category": "dog"', '"category": "d\\u00f6g"', 1),
  lambda t: t.replace('"video_id": "v1"', '"video_id": "v\\n1"', 1),
  lambda t: t.replace('"video_id": "v1"', '"video_id": "v\\u00e91"', 1),
  lambda t: t.replace('"video_id": "v1"', '"video_id": "v\u00e91"', 1),  # raw UTF-8
  lambda t: t.replace('"predicate": "chase"', '"predicate": "chase", "predicate": "bite"', 1),
  lambda t: t.replace('"tracker": "none"', '"tracker": {"a": [1, {"b": null}]}', 1),
  lambda t: t.replace('"video_id"', '"extra": [[[]]], "video_id"', 1),
  lambda t: t.replace('"video_id"', '"extra": [1, 2,], "video_id"', 1),  # invalid JSON
  lambda t: t.replace('"video_id"', '"extra": "\x01", "video_id"', 1),  # control char
  lambda t: t.replace('"generated": 1', '"generated": true', 1),
  lambda t: t.replace('"generated": 1', '"generated": 1.0', 1),
  lambda t: t.replace('"version": "VERSION 1.0"', '"version": "VERSION 2.0"', 1),
  lambda t: "\ufeff" + t,  # BOM: json.loads refuses it
  lambda t: " \n\t" + t + "\r\n ",
  lambda t: t + "x",
  lambda t: t[:-1],
  lambda t: t.replace(": ", ":").replace(", ", ","),
  lambda t: t.replace(": ", " : ").replace(", ", " ,\n "),
  lambda t: t.replace('"frame_count": 4', '"frame_count": ' + "9" * 16, 1),
  lambda t: t.replace('"trajectories": [', '"trajectories": [[], ', 1),  # shifts every frame
  # A second box of tid 3 in frame 0; a box of a tid no object has.
  lambda t: t.replace('"trajectories": [[', '"trajectories": [[' + _BOX.format(3) + ", ", 1),
  lambda t: t.replace('"trajectories": [[', '"trajectories": [[' + _BOX.format(9) + ", ", 1),
]
# The edits that leave a file the compiled reader takes (with dataset "vidor"): other spellings
# of the same numbers, escapes in values, unknown members, whitespace.
_PLAIN = {6, 8, 19, 21, 22, 23, 25, 26, 33, 36, 37}


@pytest.mark.parametrize("k", range(len(_EDITS)))
@pytest.mark.parametrize("dataset", ["vidor", None])
def test_irregular_files(tmp_path, k, dataset):
  path = tmp_path / "a.json"
  text = _EDITS[k](json.dumps(_annotation("vidor")))
  path.write_bytes(text.encode("utf-8"))
  taken = _check(path, dataset)
  if dataset == "vidor":
    assert taken == (k in _PLAIN)


def test_seeded_byte_mutations(tmp_path):
  rng = random.Random(0)
  text = json.dumps(_annotation("vidor"))
  path = tmp_path / "a.json"
  alphabet = '{}[],:"\\ 0123456789.-eE+tnfaluNIxy\u00e9'
  taken = 0
  for _ in range(1500):
    t = text
    for _ in range(rng.randint(1, 3)):
      i = rng.randrange(len(t))
      op = rng.random()
      if op < 0.4:
        t = t[:i] + t[i + 1 :]
      elif op < 0.8:
        t = t[:i] + rng.choice(alphabet) + t[i:]
      else:
        t = t[:i] + rng.choice(alphabet) + t[i + 1 :]
    path.write_bytes(t.encode("utf-8"))
    taken += _check(path, "vidor")
  assert taken > 50  # e.g. a digit changed inside a box


def test_folder_reader_uses_it_and_keeps_the_dict_readers_errors(tmp_path):
  folder = tmp_path / "validation" / "0000"
  folder.mkdir(parents=True)
  for k in range(3):
    raw = _annotation("vidor")
    raw["video_id"] = f"v{k}"
    (folder / f"v{k}.json").write_text(json.dumps(raw))
  got = vrd_io.read_groundtruth_table(str(tmp_path / "validation"), "vidor")
  want = columns.RelationTable.from_dicts(
    vrd_json.load_groundtruth(str(tmp_path / "validation"), "vidor")
  )
  assert got.video_ids == want.video_ids and got.triplets == want.triplets
  np.testing.assert_array_equal(got.boxes, want.boxes)
  np.testing.assert_array_equal(got.offset, want.offset)
  # A duration frame without its box: the dict reader's message, naming file, relation and tid.
  raw = _annotation("vidor")
  raw["video_id"] = "v9"
  raw["relation_instances"][1]["begin_fid"] = 1
  bad = folder / "v9.json"
  bad.write_text(json.dumps(raw))
  with pytest.raises(vrd_json.AnnotationError) as e:
    vrd_io.read_groundtruth_table(str(tmp_path / "validation"), "vidor")
  assert str(e.value) == (
    f"{bad}: relation_instances[1]: frame 1 of duration [1, 9) has no box for tid 7"
  )
