"""The columnar validator (CLI path) says exactly what the dict validator says.

Every submission here is written to a file, then validated twice: by
`validate_submission` on `json.load` of the file (the oracle) and by
`validate_file` (the CLI's path: the file scanned into columns, records
flagged by the scanner decoded alone). The problems - level, video,
prediction, field, message and order - must be identical, and the CLI must
refuse (or score) exactly when the oracle says so. Inputs: the validator's
own test inputs, every recorded official case, and hostile documents
(NaN / Infinity, repeated keys, missing fields, wrong types, escapes, huge
integers, odd top-level shapes).
"""

import json
import lzma
import os

import pytest

from relations.video_relations.metrics import cli
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import io as vrd_io
from relations.video_relations.metrics import validate
from tests.video_relations.metrics.helpers import gt, pred

_FIXTURE = os.path.join(os.path.dirname(__file__), "official_cases.json.xz")
NEXT = ("adult", "next_to", "dog")
SQ, FAR = [0, 0, 9, 9], [20, 0, 29, 9]


def _check(path, groundtruth=None, protocol="helper", dataset=None):
  with open(path, "rb") as f:
    raw = f.read()
  if raw.startswith(fastjson.XZ_MAGIC):
    raw = lzma.decompress(raw)
  want = validate.validate_submission(json.loads(raw), groundtruth, protocol, dataset)
  for window in (None, 53):
    got = (
      validate.validate_file(path, groundtruth, protocol, dataset)
      if (window is None)
      else _validate_small(path, groundtruth, protocol, dataset, window)
    )
    assert [str(p) for p in got.problems] == [str(p) for p in want.problems]
    assert got.problems == want.problems
  return want


def _validate_small(path, groundtruth, protocol, dataset, window):
  v = validate.ColumnarValidator(groundtruth, protocol, dataset)
  for kind, value in fastjson.scan_document(path, window=window):
    v.event(kind, value)
  return v.report()


def _bad_box_sub():
  bad_box = pred(NEXT, 0.5, (0, 2), SQ, SQ)
  bad_box["obj_traj"][1] = [0, 0, 9]
  return {
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


# The inputs of test_validate.py (with their arguments).
_VALIDATOR_TEST_INPUTS = [
  (
    _bad_box_sub(),
    {},
  ),
  (_bad_box_sub(), {"dataset": "vidor"}),
  (
    {"version": "VERSION 1.0", "results": {"v": [pred(NEXT, 0.5, (0, 1), SQ, SQ)] * 201}},
    {"protocol": "helper", "dataset": ""},
  ),
  (
    {"version": "VERSION 1.0", "results": {"v": [pred(NEXT, 0.5, (0, 1), SQ, SQ)] * 201}},
    {"protocol": "vru20", "dataset": ""},
  ),
  ({"results": []}, {}),
  (
    {
      "version": "VERSION 1.0",
      "results": {"x": [{"score": 1.0}], "y": [pred(NEXT, 1.0, (0, 1), SQ, SQ)]},
    },
    {"groundtruth": {"y": [1]}, "dataset": "vidor"},
  ),
  (
    {
      "version": "VERSION 1.0",
      "results": {"x": [{"score": 1.0}], "y": [pred(NEXT, 1.0, (0, 1), SQ, SQ)]},
    },
    {"dataset": "vidor"},
  ),
]


@pytest.mark.parametrize("sub,kwargs", _VALIDATOR_TEST_INPUTS)
def test_validator_test_inputs(tmp_path, sub, kwargs):
  path = tmp_path / "s.json"
  path.write_text(json.dumps(sub))
  _check(str(path), **kwargs)


def _text(results_body, head='"version": "VERSION 1.0", '):
  return "{" + head + '"results": {' + results_body + "}}"


_P = json.dumps(pred(NEXT, 0.5, (0, 2), SQ, FAR))
_HOSTILE = {
  # Non-finite numbers (json.load accepts NaN / Infinity).
  "nan_boxes": _text('"1": [' + _P.replace("[0, 0, 9, 9]", "[NaN, 0, 9, 9]", 1) + "]"),
  "inf_boxes": _text('"1": [' + _P.replace("[20, 0, 29, 9]", "[20, -Infinity, 29, 9]") + "]"),
  "inf_score": _text('"1": [' + _P.replace("0.5", "Infinity") + "]"),
  "nan_score": _text('"1": [' + _P.replace("0.5", "NaN") + "]"),
  # Repeated keys: json.load keeps the last value at the first position.
  "repeated_video": _text('"1": [' + _P + '], "2": [], "1": [' + _P.replace("0.5", '"x"') + ", 5]"),
  "repeated_video_repaired": _text(
    '"1": [' + _P.replace("0.5", '"x"') + '], "2": [], "1": [' + _P + "]"
  ),
  "repeated_field": _text(
    '"1": [' + _P.replace('"score": 0.5', '"score": 0.5, "score": "no"') + "]"
  ),
  "repeated_results": '{"results": {"1": [5]}, "version": "VERSION 1.0", '
  '"results": {"2": [' + _P + "]}}",
  "repeated_results_not_object": '{"results": {"1": []}, "results": 3}',
  "repeated_version": _text(
    '"1": [' + _P + "]", head='"version": "VERSION 1.0", "version": "VERSION 2.1", '
  ),
  # Missing fields, wrong types.
  "missing_fields": _text(
    '"1": [{"triplet": ["adult", "next_to", "dog"]}, {}, {"score": 0.1, "duration": [0, 1]}]'
  ),
  "wrong_types": _text(
    '"1": ['
    + ", ".join(
      [
        _P.replace("0.5", "true"),
        _P.replace("0.5", "null"),
        _P.replace("0.5", "[0.5]"),
        _P.replace("[0, 2]", "[0.0, 2]"),
        _P.replace("[0, 2]", "[0, 2, 4]"),
        _P.replace("[0, 2]", '"0-2"'),
        _P.replace('["adult", "next_to", "dog"]', '"adult next_to dog"'),
        _P.replace('["adult", "next_to", "dog"]', '["adult", "dog"]'),
        _P.replace('["adult", "next_to", "dog"]', '["adult", 1, "dog"]'),
        _P.replace("[0, 0, 9, 9]", "[0, 0, 9]", 1),
        _P.replace("[0, 0, 9, 9]", '[0, 0, "9", 9]', 1),
        _P.replace("[0, 0, 9, 9]", "[0, 0, 9, true]", 1),
        _P.replace("[[20, 0, 29, 9], [20, 0, 29, 9]]", "{}"),
        _P.replace("[0, 0, 9, 9]", "[[0, 0, 9, 9]]", 1),
        _P.replace("[0, 2]", "[true, 2]"),
        "5",
        '"text"',
        "[]",
        "null",
      ]
    )
    + "]"
  ),
  "video_not_a_list": _text('"1": {"a": 1}, "2": 5, "3": [' + _P + "]"),
  # Plain records with warnings, and the scorer's integer semantics.
  "warnings": _text(
    '"1": ['
    + ", ".join(
      [
        _P.replace("[0, 2]", "[2, 2]"),
        _P.replace("[0, 2]", "[-1, 1]"),
        _P.replace("[0, 0, 9, 9]", "[9, 0, 0, 9]", 1),
        _P.replace("[0, 2]", "[0, 3]"),
        _P.replace("0.5", "1"),
        _P.replace("0.5", "123456789012345678901234567890"),
        _P.replace("[0, 0, 9, 9]", "[0, 0, 9, 1234567890123456789012]", 1),
        _P.replace("0.5", "1e-400"),
        _P.replace("0.5", "0.1e400"),
        _P.replace('"dog"', '"zebra"').replace('"next_to"', '"taller"'),
      ]
    )
    + "]"
  ),
  # Escapes in keys and names, non-ASCII.
  "escapes": _text(
    '"v\\u0031": ['
    + _P.replace('"score"', '"sc\\u006fre"').replace('"adult"', '"ad\\u0075lt"')
    + "], \"caf\u00e9\": ["
    + _P.replace('"dog"', '"d\u00f6g"')
    + "]"
  ),
  "escaped_results_key": '{"r\\u0065sults": {"1": [' + _P + "]}}",
  "other_members": '{"external_data": {"used": true, "details": "a [b] '
  '\\"c\\""}, "results": {"1": [' + _P + ']}, "x": '
  '[1, {"results": 3}]}',
  # Top-level shapes.
  "top_list": "[1, 2]",
  "top_string": '"results"',
  "no_results": '{"version": "VERSION 1.0"}',
  "results_null": '{"results": null}',
  "empty_results": _text(""),
  "empty_videos": _text('"1": [], "2": []'),
}


@pytest.mark.parametrize("name", sorted(_HOSTILE))
@pytest.mark.parametrize("groundtruth", [None, {"1": [1], "v1": [1]}])
def test_hostile_submissions(tmp_path, name, groundtruth):
  path = tmp_path / f"{name}.json"
  path.write_bytes(_HOSTILE[name].encode())
  json.loads(_HOSTILE[name])  # valid JSON: the validator's business
  _check(str(path), groundtruth)
  _check(str(path), groundtruth, protocol="vru20", dataset="vidvrd")


def test_every_recorded_case(tmp_path):
  with lzma.open(_FIXTURE, "rt") as f:
    cases = [c["case"] for c in json.load(f)["cases"]]
  path = tmp_path / "s.json"
  warned = 0
  for case in cases:
    sub = {"version": "VERSION 1.0", "results": case["prediction"]}
    path.write_text(json.dumps(sub))
    rep = _check(str(path), case["groundtruth"])
    warned += bool(rep.warnings)
  assert warned > 100


def _cli(tmp_path, text, capsys):
  g = {"1": [gt(NEXT, (0, 2), SQ, FAR)]}
  gpath = tmp_path / "gt.json"
  gpath.write_text(
    json.dumps(
      {
        v: [dict(r, triplet=list(r["triplet"]), duration=list(r["duration"])) for r in rels]
        for v, rels in g.items()
      }
    )
  )
  ppath = tmp_path / "p.json"
  ppath.write_text(text)
  rc = cli.main(["--groundtruth", str(gpath), "--prediction", str(ppath)])
  return rc, capsys.readouterr()


@pytest.mark.parametrize("name", sorted(_HOSTILE))
def test_cli_refuses_exactly_when_the_validator_errs(tmp_path, capsys, name):
  rc, cap = _cli(tmp_path, _HOSTILE[name], capsys)
  try:  # a video or top-level key twice: refused unread, as the dict reader does
    vrd_io.load_submission(str(tmp_path / "p.json"))
  except vrd_io.SubmissionError as e:
    assert rc == 2 and f"error: {e}" in cap.err and "more than once" in str(e)
    return
  want = validate.validate_submission(json.loads(_HOSTILE[name]), {"1": [1]})
  if want.problems:
    assert want.summary() in cap.err
  if not want.ok:
    assert rc == 1 and "format errors; not scored" in cap.err
  else:
    assert "format errors" not in cap.err
    assert rc in (0, 1)
    assert (rc == 0) == ("mAP" in cap.out)


@pytest.mark.parametrize(
  "text,message",
  [
    ('{"results": {"1": [', "malformed JSON: invalid JSON at byte 19 (line 1, column 20)"),
    ('{"results": {}} x', "malformed JSON: invalid JSON at byte 16"),
    ('{"results": {"1": [1, 2,]}}', "malformed JSON: invalid JSON"),
    ("[" * 5000 + "]" * 5000, "nesting deeper than 4096 levels"),
    ("", "malformed JSON: invalid JSON at byte 0"),
  ],
)
def test_cli_malformed_json(tmp_path, capsys, text, message):
  rc, cap = _cli(tmp_path, text, capsys)
  assert rc == 2 and message in cap.err and "p.json" in cap.err


def test_cli_not_utf8_or_broken_xz(tmp_path, capsys):
  rc, cap = _cli(tmp_path, "", capsys)
  (tmp_path / "p.json").write_bytes(b'{"results": {"\xff": []}}')
  g = str(tmp_path / "gt.json")
  assert cli.main(["--groundtruth", g, "--prediction", str(tmp_path / "p.json")]) == 2
  assert (
    "cannot decompress / decode: 'utf-8' codec can't decode byte 0xff at byte 14"
  ) in capsys.readouterr().err
  data = lzma.compress(b'{"results": {}}')
  (tmp_path / "p.json.xz").write_bytes(data[:-8])
  assert cli.main(["--groundtruth", g, "--prediction", str(tmp_path / "p.json.xz")]) == 2
  assert "cannot decompress / decode: cannot decompress" in (capsys.readouterr().err)
