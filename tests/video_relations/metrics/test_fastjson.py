"""The JSON -> RelationTable reader: exact numbers, strings and refusals."""

import json
import lzma
import math
import os
import random

import numpy as np
import pytest

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import scoring

_FIXTURE = os.path.join(os.path.dirname(__file__), "official_cases.json.xz")
_NEXT = ["adult", "next_to", "dog"]


def _doc(boxes, score=0.5, duration=None, triplet=None, extra=""):
  duration = duration or [0, len(boxes)]
  pred = {"triplet": triplet or _NEXT, "score": score, "duration": duration,
          "sub_traj": boxes, "obj_traj": boxes}
  return ('{"version": "VERSION 1.0", "results": {"v": [' + json.dumps(pred)
          + ']}' + extra + '}')


def _tokens(rng, n):
  """Number tokens of every shape json.dumps and other writers produce."""
  out = []
  for _ in range(n):
    kind = rng.randrange(8)
    if kind == 0:
      out.append(repr(rng.uniform(-2000, 2000)))             # 16-17 digits
    elif kind == 1:
      out.append(repr(round(rng.uniform(-2000, 2000), rng.randrange(5))))
    elif kind == 2:
      out.append(str(rng.randrange(-10 ** 15 + 1, 10 ** 15)))  # ints
    elif kind == 3:
      out.append(repr(rng.uniform(-1, 1) * 10.0 ** rng.randrange(-320, 300)))
    elif kind == 4:
      digits = "".join(rng.choice("0123456789")
                       for _ in range(rng.randrange(1, 30)))
      head = digits[0] if digits[0] != "0" else "0"
      out.append(f"{rng.choice(['', '-'])}{head}.{digits[1:] or '0'}"
                 f"{rng.choice(['', 'e5', 'E-7', 'e+22', 'e-23', 'e308'])}")
    elif kind == 5:
      out.append(rng.choice(["0", "-0", "0.0", "-0.0", "1e0", "0.1", "-1E-1",
                             "NaN", "Infinity", "-Infinity", "1e400",
                             "123456789012345.6", "9007199254740993.0"]))
    elif kind == 6:
      out.append(f"{rng.randrange(1, 10 ** 19)}e{rng.randrange(-340, 300)}")
    else:
      # Exactly halfway between two doubles (odd 54-bit m times 2**e):
      # the correctly rounded result is the even neighbour.
      m, e = rng.getrandbits(54) | 1 | (1 << 53), rng.randrange(-70, 20)
      out.append(f"{m * 2 ** e}.0" if e >= 0 else _decimal(m, -e))
  return out


def _decimal(m, k):
  """m / 2**k written out exactly in decimal."""
  digits = str(m * 5 ** k)
  digits = digits.rjust(k + 1, "0")
  return digits[:-k] + "." + digits[-k:]


def test_numbers_equal_json_loads_bit_for_bit():
  rng = random.Random(0)
  toks = _tokens(rng, 20000)
  boxes = [toks[i:i + 4] for i in range(0, len(toks), 4)]
  text = ('{"results": {"v": [{"triplet": ["a", "b", "c"], "score": 0.5, '
          '"duration": [0, 1], "sub_traj": [' +
          ", ".join("[" + ", ".join(b) + "]" for b in boxes) +
          '], "obj_traj": []}]}}')
  table = fastjson.parse_table(text.encode())
  want = [float(x) for b in json.loads(text)["results"]["v"][0]["sub_traj"]
          for x in b]
  got = table.boxes.reshape(-1)
  assert len(got) == len(want)
  w = np.asarray(want)
  assert np.array_equal(got.view(np.int64), w.view(np.int64))


def test_tables_from_json_reproduce_the_recorded_official_numbers():
  with lzma.open(_FIXTURE, "rt") as f:
    cases = json.load(f)["cases"]
  compared = 0
  for rec in cases:
    case = rec["case"]
    sub = json.dumps({"version": "VERSION 1.0",
                      "results": case["prediction"]}).encode()
    try:
      pred = fastjson.parse_table(sub)
    except fastjson.NotTabular as e:
      assert "integer score" in str(e)
      continue
    gt = fastjson.parse_table(json.dumps(case["groundtruth"]).encode(),
                              groundtruth=True)
    for protocol in ("helper", "vru20"):
      off = rec["official"][f"{protocol}/all"]
      try:
        r = scoring.evaluate_tables(gt, pred, protocol)
      except scoring.ScoringError:
        assert off["status"] == "error"
        continue
      assert off["status"] == "ok"
      assert r.official_lines() == off["lines"]
      compared += 1
  assert compared > 400


def test_strings_decode_like_json_loads():
  # Escaped and plain spellings of one name are one triplet; ids decode.
  text = ('{"results": {"v\\u0031": ['
          '{"triplet": ["ball\\/sports_ball", "next_to", "dog"], "score": 1,'
          ' "duration": [0, 1], "sub_traj": [[0,0,1,1]],'
          ' "obj_traj": [[0,0,1,1]]}]}}')
  with pytest.raises(fastjson.NotTabular, match="integer score"):
    fastjson.parse_table(text.encode())
  text = text.replace('"score": 1', '"score": 1.0')
  text = text.replace("]}]}}", ']}, {"triplet": ["ball/sports_ball", '
                      '"next_to", "dog"], "score": 0.5, "duration": [0, 1], '
                      '"sub_traj": [], "obj_traj": [], "x": [null, {}]}]}}')
  t = fastjson.parse_table(text.encode())
  assert t.video_ids == ["v1"]
  assert t.triplets == [("ball/sports_ball", "next_to", "dog")]
  assert t.triplet.tolist() == [0, 0]
  assert t.length.tolist() == [[1, 1], [0, 0]]
  assert t.flags.tolist() == [3, 3] and t.score.tolist() == [1.0, 0.5]


@pytest.mark.parametrize("text", [
    '{"results": {"v": []}', '{"results": {"v": []}} x', '{"results": [}',
    _doc([[0, 0, 1, 1]]).replace("0.5", "01"),
    _doc([[0, 0, 1, 1]]).replace("0.5", ".5"),
    _doc([[0, 0, 1, 1]]).replace("0.5", "1."),
    _doc([[0, 0, 1, 1]]).replace("0.5", "-NaN"),
    _doc([[0, 0, 1, 1]]).replace('"v"', '"v\\x"'),
    _doc([[0, 0, 1, 1]], extra=', "e": [1, 2,]'),
    _doc([[0, 0, 1, 1]], extra=', "e": {"a" 1}'),
    _doc([[0, 0, 1, 1]], extra=', "e": tru'),
])
def test_invalid_json_is_refused_like_json_loads(text):
  # Never a table from a document json.load refuses (the reason given is
  # the first problem met: grammar, a shape the table needs, or "01" read
  # as the integer score 0).
  with pytest.raises(json.JSONDecodeError):
    json.loads(text)
  with pytest.raises(fastjson.NotTabular):
    fastjson.parse_table(text.encode())


@pytest.mark.parametrize("text,reason", [
    (_doc([[0, 0, 1, 1]], score=1), "integer score"),
    (_doc([[0, 0, 1, 1, 2]]), "box is not 4 numbers"),
    (_doc([[0, 0, 1]]), "box is not 4 numbers"),
    (_doc([[0, 0, 1, None]]), "box is not 4 numbers"),
    (_doc([[0, 0, 1, 10 ** 16]]), "more than 15 digits"),
    (_doc([[0, 0, 1, 1]], duration=[0, 1, 2]), "duration is not 2"),
    (_doc([[0, 0, 1, 1]], triplet=["a", "b"]), "triplet is not 3"),
    (_doc([[0, 0, 1, 1]]).replace('"score": 0.5, ', ""), "missing"),
    (_doc([[0, 0, 1, 1]]).replace('"score": 0.5', '"score": 0.5, '
                                  '"score": 0.7'), "appears twice"),
    ('{"results": {"v": [], "v": []}}', "video id appears twice"),
    ('{"version": "VERSION 1.0"}', "no top-level 'results'"),
    ('[1, 2]', "unexpected type"),
])
def test_content_the_table_cannot_hold_is_refused(text, reason):
  json.loads(text)          # valid JSON: the caller falls back to json.load
  with pytest.raises(fastjson.NotTabular, match=reason):
    fastjson.parse_table(text.encode())


def test_read_table_reads_xz_and_other_members(tmp_path):
  text = _doc([[0.5, 1, 2.25, 3]], extra=', "external_data": {"used": '
              'false, "details": "a \\"quoted\\" [text]", "n": [1e5, -0]}')
  with lzma.open(tmp_path / "s.json.xz", "wt") as f:
    f.write(text)
  t = fastjson.read_table(str(tmp_path / "s.json.xz"))
  ref = columns.RelationTable.from_dicts(json.loads(text)["results"])
  assert t.boxes.tolist() == ref.boxes.tolist() == [[0.5, 1, 2.25, 3]] * 2
  assert math.isclose(t.score[0], 0.5) and t.video_ids == ["v"]
