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
from tests.video_relations.metrics.helpers import assert_same_table

_FIXTURE = os.path.join(os.path.dirname(__file__), "official_cases.json.xz")
_NEXT = ["adult", "next_to", "dog"]


def _doc(boxes, score=0.5, duration=None, triplet=None, extra=""):
  duration = duration or [0, len(boxes)]
  pred = {
    "triplet": triplet or _NEXT,
    "score": score,
    "duration": duration,
    "sub_traj": boxes,
    "obj_traj": boxes,
  }
  return '{"version": "VERSION 1.0", "results": {"v": [' + json.dumps(pred) + ']}' + extra + '}'


def _tokens(rng, n):
  """Number tokens of every shape json.dumps and other writers produce."""
  out = []
  for _ in range(n):
    kind = rng.randrange(8)
    if kind == 0:
      out.append(repr(rng.uniform(-2000, 2000)))  # 16-17 digits
    elif kind == 1:
      out.append(repr(round(rng.uniform(-2000, 2000), rng.randrange(5))))
    elif kind == 2:
      out.append(str(rng.randrange(-(10**15) + 1, 10**15)))  # ints
    elif kind == 3:
      out.append(repr(rng.uniform(-1, 1) * 10.0 ** rng.randrange(-320, 300)))
    elif kind == 4:
      digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 30)))
      head = digits[0] if digits[0] != "0" else "0"
      out.append(
        f"{rng.choice(['', '-'])}{head}.{digits[1:] or '0'}"
        f"{rng.choice(['', 'e5', 'E-7', 'e+22', 'e-23', 'e308'])}"
      )
    elif kind == 5:
      out.append(
        rng.choice(
          [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1e0",
            "0.1",
            "-1E-1",
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "123456789012345.6",
            "9007199254740993.0",
          ]
        )
      )
    elif kind == 6:
      out.append(f"{rng.randrange(1, 10**19)}e{rng.randrange(-340, 300)}")
    else:
      # Exactly halfway between two doubles (odd 54-bit m times 2**e):
      # the correctly rounded result is the even neighbour.
      m, e = rng.getrandbits(54) | 1 | (1 << 53), rng.randrange(-70, 20)
      out.append(f"{m * 2**e}.0" if e >= 0 else _decimal(m, -e))
  return out


def _decimal(m, k):
  """m / 2**k written out exactly in decimal."""
  digits = str(m * 5**k)
  digits = digits.rjust(k + 1, "0")
  return digits[:-k] + "." + digits[-k:]


def test_numbers_equal_json_loads_bit_for_bit():
  rng = random.Random(0)
  toks = _tokens(rng, 20000)
  boxes = [toks[i : i + 4] for i in range(0, len(toks), 4)]
  text = (
    '{"results": {"v": [{"triplet": ["a", "b", "c"], "score": 0.5, '
    '"duration": [0, 1], "sub_traj": ['
    + ", ".join("[" + ", ".join(b) + "]" for b in boxes)
    + '], "obj_traj": []}]}}'
  )
  table = fastjson.parse_table(text.encode())
  want = [float(x) for b in json.loads(text)["results"]["v"][0]["sub_traj"] for x in b]
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
    sub = json.dumps({"version": "VERSION 1.0", "results": case["prediction"]}).encode()
    # Integer scores too: irregular records keep their Python value.
    pred = fastjson.parse_table(sub)
    gt = fastjson.parse_table(json.dumps(case["groundtruth"]).encode(), groundtruth=True)
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
  assert compared > 450


def test_strings_decode_like_json_loads():
  # Escaped and plain spellings of one name are one triplet; ids decode.
  text = (
    '{"results": {"v\\u0031": ['
    '{"triplet": ["ball\\/sports_ball", "next_to", "dog"], "score": 1,'
    ' "duration": [0, 1], "sub_traj": [[0,0,1,1]],'
    ' "obj_traj": [[0,0,1,1]]}]}}'
  )
  t = fastjson.parse_table(text.encode())
  assert t.py_scores == {0: 1} and t.score.tolist() == [1.0]
  text = text.replace('"score": 1', '"score": 1.0')
  text = text.replace(
    "]}]}}",
    ']}, {"triplet": ["ball/sports_ball", '
    '"next_to", "dog"], "score": 0.5, "duration": [0, 1], '
    '"sub_traj": [], "obj_traj": [], "x": [null, {}]}]}}',
  )
  t = fastjson.parse_table(text.encode())
  assert t.video_ids == ["v1"]
  assert t.triplets == [("ball/sports_ball", "next_to", "dog")]
  assert t.triplet.tolist() == [0, 0]
  assert t.length.tolist() == [[1, 1], [0, 0]]
  assert t.flags.tolist() == [3, 3] and t.score.tolist() == [1.0, 0.5]


@pytest.mark.parametrize(
  "text",
  [
    '{"results": {"v": []}',
    '{"results": {"v": []}} x',
    '{"results": [}',
    _doc([[0, 0, 1, 1]]).replace("0.5", "01"),
    _doc([[0, 0, 1, 1]]).replace("0.5", ".5"),
    _doc([[0, 0, 1, 1]]).replace("0.5", "1."),
    _doc([[0, 0, 1, 1]]).replace("0.5", "-NaN"),
    _doc([[0, 0, 1, 1]]).replace('"v"', '"v\\x"'),
    _doc([[0, 0, 1, 1]], extra=', "e": [1, 2,]'),
    _doc([[0, 0, 1, 1]], extra=', "e": {"a" 1}'),
    _doc([[0, 0, 1, 1]], extra=', "e": tru'),
  ],
)
def test_invalid_json_is_refused_like_json_loads(text):
  # Never a table from a document json.load refuses (the reason given is
  # the first problem met: grammar, a shape the table needs, or "01" read
  # as the integer score 0).
  with pytest.raises(json.JSONDecodeError):
    json.loads(text)
  with pytest.raises(fastjson.NotTabular):
    fastjson.parse_table(text.encode())


@pytest.mark.parametrize(
  "text",
  [
    _doc([[0, 0, 1, 1]], score=1),
    _doc([[0, 0, 1, 1, 2]]),
    _doc([[0, 0, 1]]),
    _doc([[0, 0, 1, None]]),
    _doc([[0, 0, 1, 10**16 + 1]]),
    _doc([[0, 0, 1, 1]], score=10**30),
    _doc([[0, 0, 1, 1]], score=1e-320),
    _doc([[0, 0, 1, 1]]).replace('"score": 0.5, ', ""),
    _doc([[0, 0, 1, 1]]).replace('"score": 0.5', '"score": 0.5, "score": 0.7'),
    _doc([[0, 0, 1, 1]]).replace('"score"', '"sc\\u006fre"'),
    _doc([[0, 0, 1, 1]], triplet=["a", "b"]),
    _doc([[0, 0, 1, 1]]).replace('"v"', '"w": [], "v"').replace(']}}', '], "w": [], "v": []}}'),
  ],
)
def test_irregular_records_read_as_json_load_gives_them(text):
  # Records the scanner does not take are decoded alone: the table is the
  # one `from_dicts` builds from json.load's objects (last of a repeated
  # key, at the first key's position; integer scores kept as Python ints).
  want = columns.RelationTable.from_dicts(json.loads(text)["results"])
  got = fastjson.parse_table(text.encode())
  assert_same_table(got, want, ("score", "duration", "flags", "length"))
  scores = [p.get("score") for ps in json.loads(text)["results"].values() for p in ps]
  assert (got.py_scores or {}) == {i: s for i, s in enumerate(scores) if isinstance(s, int)}


@pytest.mark.parametrize(
  "text,reason",
  [
    (_doc([[0, 0, 1, 1]], duration=[0, 1, 2]), "not a relation"),
    (_doc([[0, 0, 1, 1]], triplet=["a", 1, "b"]), "not a relation"),
    (_doc([[0, 0, 1, 1]]).replace('"sub_traj"', '"x"'), "not a relation"),
    ('{"results": {"v": 5}}', "not a list"),
    ('{"version": "VERSION 1.0"}', "no top-level 'results'"),
    ('{"results": []}', "no top-level 'results'"),
    ('[1, 2]', "no top-level 'results'"),
  ],
)
def test_content_the_table_cannot_hold_is_refused(text, reason):
  json.loads(text)  # valid JSON: the validator explains it
  with pytest.raises(fastjson.NotTabular, match=reason):
    fastjson.parse_table(text.encode())


def test_read_table_reads_xz_and_other_members(tmp_path):
  text = _doc(
    [[0.5, 1, 2.25, 3]],
    extra=', "external_data": {"used": false, "details": "a \\"quoted\\" [text]", "n": [1e5, -0]}',
  )
  with lzma.open(tmp_path / "s.json.xz", "wt") as f:
    f.write(text)
  t = fastjson.read_table(str(tmp_path / "s.json.xz"))
  ref = columns.RelationTable.from_dicts(json.loads(text)["results"])
  assert t.boxes.tolist() == ref.boxes.tolist() == [[0.5, 1, 2.25, 3]] * 2
  assert math.isclose(t.score[0], 0.5) and t.video_ids == ["v"]


@pytest.mark.parametrize(
  "data,words",
  [
    (b'{"results": x\xc3', "can't decode byte 0xc3 at byte 13: unexpected end of data"),
    (b'{"results": {}} \xe2\x82', "can't decode byte 0xe2 at byte 16: unexpected end of data"),
    (b'{"results": x}\xff', "can't decode byte 0xff at byte 14"),
    (b'{"results": {"\xc3\xa9": [}} \xc3', "can't decode byte 0xc3 at byte 23: unexpected end"),
  ],
)
def test_a_file_not_utf8_is_refused_at_the_byte_json_loads_names(tmp_path, data, words):
  # json.load decodes the whole file first: the first undecodable byte wins over a JSON
  # error, wherever it is; the same from bytes, from a mapped file and window by window.
  with pytest.raises(UnicodeDecodeError):
    json.loads(data)
  path = tmp_path / "s.json"
  path.write_bytes(data)
  for source, window in ((data, None), (str(path), None), (str(path), 7)):
    with pytest.raises(fastjson.FormatError) as e:
      list(fastjson.scan_document(source, window=window))
    assert e.value.kind == "decode"
    assert words in e.value.detail, (source, window)


@pytest.mark.parametrize("key_bits", [21, 2])
def test_triplet_ids_number_new_triplets_as_sorted_name_rows(monkeypatch, key_bits):
  # Triplet ids over several chunks equal numbering each chunk's distinct rows in sorted
  # order, with the packed-key fast path (21 bits a name) and past its limit (2 bits: 4 names).
  monkeypatch.setattr(fastjson, "_KEY_BITS", key_bits)
  monkeypatch.setattr(fastjson, "_KEY_MASK", (1 << key_bits) - 1)
  rng = np.random.default_rng(0)
  got, want = fastjson.Vocabulary(), fastjson.Vocabulary()
  for name in ["adult", "dog", "next_to", "ball", "child", "watch", "a/b"]:
    got.name_id(name)
    want.name_id(name)
  for rows in (50, 1, 300, 7):
    ids = rng.integers(0, 7, (rows, 3))
    ids[rows // 2 :] = ids[: rows - rows // 2]  # repeated rows
    uniq, inverse = np.unique(ids, axis=0, return_inverse=True)
    tid = np.asarray([want.triplet_id(tuple(want.names[j] for j in u)) for u in uniq.tolist()])
    np.testing.assert_array_equal(got.triplet_ids(ids), tid[inverse.reshape(-1)])
  assert got.triplets == want.triplets and len(got.triplets) > 50
  assert bool(got.triplet_keys) is (key_bits == 21)


def test_initial_capacity_follows_the_document_size(monkeypatch, tmp_path):
  # No more videos / records / boxes than the bytes can hold, at most CAPACITY, and all of
  # CAPACITY when the size is unknown (a compressed file).
  assert fastjson.capacity_for(600) == (600 // 7 + 16, 600 // 60 + 16, 600 // 9 + 16)
  assert fastjson.capacity_for(10**12) == fastjson.CAPACITY
  assert fastjson.capacity_for(None) == fastjson.CAPACITY
  seen = []
  real = fastjson._Outputs
  monkeypatch.setattr(fastjson, "_Outputs", lambda *c: seen.append(c) or real(*c))
  rec = {"triplet": ["a", "b", "c"], "score": 1, "duration": [0, 3]}
  rec.update(sub_traj=[[1, 2, 3, 4]] * 3, obj_traj=[[1, 2, 3, 4]] * 3)
  data = json.dumps({"results": {f"v{i}": [rec] * 2 for i in range(3)}}).encode()
  (tmp_path / "a.json").write_bytes(data)
  (tmp_path / "a.json.xz").write_bytes(lzma.compress(data))
  plain, xz = str(tmp_path / "a.json"), str(tmp_path / "a.json.xz")
  for source, want in ((data, len(data)), (plain, len(data)), (xz, None)):
    seen.clear()
    events = list(fastjson.scan_document(source, parallel=False))
    assert seen == [fastjson.capacity_for(want)]
    assert sum(len(v.video_ids) for k, v in events if k == "chunk") == 3
  assert_same_table(fastjson.read_table(plain), fastjson.read_table(xz))
