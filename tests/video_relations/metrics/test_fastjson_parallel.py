"""Scanning a window in two threads gives the sequential scan's events, errors and positions.

`fastjson.scan_document(parallel=True)` cuts each window at a guessed boundary between two
videos and keeps the second thread's scan only when the first stops exactly there. These tests
cut every window (SPLIT_MIN = 1) of fuzzed documents built to mislead the guess: the cut pattern
inside strings and inside records, any whitespace, irregular records, repeated keys and
"results", GT mappings and annotation files, and corruptions anywhere; the videos (every field,
bit for bit), the other events (and after how many videos) and the errors must be the ones of
the sequential scan, window size by window size.
"""

import json
import random
import struct
import threading

import pytest

from relations.video_relations.metrics import fastjson

# Strings that contain the pattern the cut looks for, or parts of it.
_TRICKY = ['a}], "b', '}]', '}] , "', "x]}", 'q"}],"', "\\", "é}]\u2028", "\u00e9"]
_NAMES = ["adult", "dog", "next_to", "ball/sports_ball", "lean_on"] + _TRICKY


class Obj:
  """A JSON object as a list of (key, value) pairs: keys may repeat."""

  def __init__(self, *pairs):
    self.pairs = list(pairs)


def _ws(rng):
  return rng.choice(["", "", "", " ", "\n", "\n  ", "\t", " \r\n "])


def _num(rng, x):
  if isinstance(x, int):
    return str(x)
  return rng.choice([repr(x), repr(round(x, 2)), f"{x:.2f}", f"{x:e}"])


def _emit(v, rng, out):
  if isinstance(v, Obj):
    out.append("{" + _ws(rng))
    for k, (key, val) in enumerate(v.pairs):
      if k:
        out.append(_ws(rng) + "," + _ws(rng))
      out.append(json.dumps(key, ensure_ascii=rng.random() < 0.5) + _ws(rng) + ":" + _ws(rng))
      _emit(val, rng, out)
    out.append(_ws(rng) + "}")
  elif isinstance(v, list):
    out.append("[" + _ws(rng))
    for k, item in enumerate(v):
      if k:
        out.append(_ws(rng) + "," + _ws(rng))
      _emit(item, rng, out)
    out.append(_ws(rng) + "]")
  elif isinstance(v, bool) or v is None:
    out.append(json.dumps(v))
  elif isinstance(v, (int, float)):
    out.append(_num(rng, v))
  else:
    out.append(json.dumps(v, ensure_ascii=rng.random() < 0.5))


def _boxes(rng, n):
  out = []
  for _ in range(n):
    x, y = rng.uniform(0, 1000), rng.uniform(0, 600)
    box = [x, y, x + rng.uniform(-5, 300), y + rng.uniform(0, 300)]
    out.append([round(c) if rng.random() < 0.3 else c for c in box])
  return out


def _record(rng, gt):
  n = rng.randrange(0, 5)
  start = rng.randrange(0, 50)
  pairs = [
    ("triplet", [rng.choice(_NAMES) for _ in range(3)]),
    ("subject_tid", rng.randrange(5)) if gt else ("score", rng.random()),
    ("duration", [start, start + n]),
    ("sub_traj", _boxes(rng, n)),
    ("obj_traj", _boxes(rng, n)),
  ]
  if gt:
    pairs.append(("object_tid", rng.randrange(5)))
  rng.shuffle(pairs)
  r = rng.random()
  if r < 0.1:  # a field the scanner skips, ending like a video: '}]' then ', "'
    pairs.insert(rng.randrange(len(pairs) + 1), ("extra", [Obj(("k", [1, {"x": "}]"}])), Obj()]))
  elif r < 0.15:
    pairs.pop(rng.randrange(len(pairs)))  # irregular: a field missing
  elif r < 0.2:
    pairs.append((pairs[0][0], pairs[0][1]))  # irregular: a repeated field
  elif r < 0.25 and not gt:
    pairs = [(k, 1 if k == "score" else v) for k, v in pairs]  # an integer score
  return Obj(*pairs)


def _videos(rng, gt, first_id=0):
  out = []
  for k in range(rng.randrange(0, 14)):
    vid = rng.choice([str(first_id + k), f"{first_id + k}}}], \"", "\u00e9" + str(k)])
    if rng.random() < 0.05 and out:
      vid = out[rng.randrange(len(out))][0]  # a repeated video id
    value = [_record(rng, gt) for _ in range(rng.randrange(0, 6))]
    if rng.random() < 0.05:
      value = rng.choice([{"not": "a list"}, "}], \"", 3])
    out.append((vid, value))
  return out


def _document(rng):
  kind = rng.random()
  if kind < 0.2:  # a GT mapping
    return Obj(*_videos(rng, True)), True
  if kind < 0.25:  # one annotation file (read as GT)
    return (
      Obj(
        ("version", "VERSION 1.0"), ("video_id", "1"), ("trajectories", [[]]), *_videos(rng, True)
      ),
      True,
    )
  top = [("version", "VERSION 1.0"), ("results", Obj(*_videos(rng, False)))]
  if rng.random() < 0.2:
    top.append(("external_data", Obj(("used", True), ("details", "}], \"x"))))
  if rng.random() < 0.1:
    top.append(("results", Obj(*_videos(rng, False, 100))))  # the last one wins
  if rng.random() < 0.05:
    top.append(("results", [1, 2]))
  rng.shuffle(top)
  return Obj(*top), False


def _corrupt(rng, text):
  data = text.encode("utf-8")
  r = rng.random()
  if r < 0.7 or not data:
    return data
  at = rng.randrange(len(data))
  if r < 0.8:
    return data[:at]  # truncated
  if r < 0.9:
    return data[:at] + rng.choice([b"]", b"}", b",", b'"', b"x", b"\xff", b"\\"]) + data[at + 1 :]
  return data[:at] + b"\x80" + data[at:]  # not UTF-8


def _events(data, groundtruth, window, parallel, detach):
  """The scan's events with the videos flattened (chunk boundaries are free to differ)."""
  out = []
  videos = 0
  try:
    for kind, value in fastjson.scan_document(
      data, groundtruth, window=window, parallel=parallel, detach=detach, unique_keys=True
    ):
      if kind != "chunk":
        out.append((kind, value, videos))
        continue
      c = value
      names = c.vocab.names
      for v, vid in enumerate(c.video_ids):
        rows = []
        for r in range(int(c.rows[v]), int(c.rows[v + 1])):
          row = (int(c.span[r, 0]) + c.base, int(c.span[r, 1]) + c.base, int(c.flag[r]))
          if c.flag[r] & fastjson.IRREGULAR:
            row += (json.dumps(c.decode(r)),)
          else:
            boxes = []
            for side in range(2):
              s, n = (int(x) for x in c.traj[r, side])
              boxes.append(c.boxes[s : s + n].tobytes())
            row += (
              tuple(names[j] for j in c.names[r]),
              struct.pack("<d", c.score[r]),
              c.duration[r].tobytes(),
              int(c.flags[r]),
              tuple(boxes),
            )
          rows.append(row)
        span = tuple(int(x) + c.base for x in c.value_span[v])
        out.append(("video", vid, bool(c.is_list[v]), span, tuple(rows)))
        videos += 1
  except fastjson.FormatError as e:
    out.append(("error", e.kind, e.message("doc.json")))
  return out


@pytest.fixture
def split_everywhere(monkeypatch):
  monkeypatch.setattr(fastjson, "SPLIT_MIN", 1)
  monkeypatch.setattr(fastjson, "MAX_MISSES", 10**9)


@pytest.mark.parametrize("seed", range(12))
def test_two_thread_scan_equals_the_sequential_scan(split_everywhere, tmp_path, seed):
  rng = random.Random(seed)
  kept = 0
  for _ in range(40):
    doc, gt = _document(rng)
    parts = []
    _emit(doc, rng, parts)
    data = _corrupt(rng, "".join(parts))
    # A file in one window is mapped, and (chunks not detached) the second thread writes its
    # boxes into the first one's array.
    path = tmp_path / "doc.json"
    path.write_bytes(data)
    assert _events(str(path), gt, None, True, False) == _events(data, gt, None, False, False)
    for window in (None, 64, 301, 4096):
      detach = rng.random() < 0.5
      want = _events(data, gt, window, False, detach)
      got = _events(data, gt, window, True, detach)
      assert got == want, (seed, window, data[:300])
      kept += sum(e[0] == "video" for e in want)
  assert kept > 100  # the documents hold videos to split between


def test_a_cut_inside_a_string_or_a_record_is_not_kept(split_everywhere):
  # Every candidate cut of this document is a decoy: the scan before it does not stop there.
  rec = '{"triplet": ["a}], \\"b", "c", "d"], "extra": [{"x": 1}], "score": 0.5, '
  rec += '"duration": [0, 1], "sub_traj": [[1, 2, 3, 4]], "obj_traj": [[1, 2, 3, 4]]}'
  data = ('{"results": {"1": [' + rec + ", " + rec + "]}}").encode()
  want = _events(data, False, None, False, False)
  assert _events(data, False, None, True, False) == want
  assert [e[0] for e in want] == ["video", "end"]


def test_a_cut_between_videos_is_kept(split_everywhere, monkeypatch):
  calls = []
  real = fastjson.json_scan.scan_window

  def counting(buf, final, *args):
    calls.append((len(buf), args[2]))
    return real(buf, final, *args)

  monkeypatch.setattr(fastjson.json_scan, "scan_window", counting)
  rec = '{"triplet": ["a", "b", "c"], "score": 0.5, "duration": [0, 1], '
  rec += '"sub_traj": [[1, 2, 3, 4]], "obj_traj": [[1, 2, 3, 4]]}'
  videos = ", ".join(f'"{k}": [{rec}]' for k in range(8))
  data = ('{"version": "VERSION 1.0", "results": {' + videos + "}}").encode()
  events = _events(data, False, None, True, False)
  # After the "version" and the "results" keys: a head up to the cut and a tail from it (the
  # window's last 4 videos), and no sequential scan of that window.
  cut = data.index(b'"4"')
  assert calls == [(len(data), 0), (len(data), 1), (cut - 1, 27), (len(data), cut - 1)]
  assert [e[1] for e in events if e[0] == "video"] == [str(k) for k in range(8)]
  assert events == _events(data, False, None, False, False)


def test_a_document_that_misleads_every_cut_is_scanned_in_one_thread_after_a_few(monkeypatch):
  # One video of records with a list of objects before "sub_traj": every cut the guess finds
  # is inside a record. After MAX_MISSES lost second-thread scans, no more are tried.
  monkeypatch.setattr(fastjson, "SPLIT_MIN", 1)
  heads = []
  real = fastjson.json_scan.scan_window

  def counting(*args):
    heads.append(threading.current_thread().name.startswith("scan_head"))
    return real(*args)

  monkeypatch.setattr(fastjson.json_scan, "scan_window", counting)
  rec = '{"triplet": ["a", "b", "c"], "score": 0.5, "duration": [0, 1], "extra": [{"x": 1}], '
  rec += '"sub_traj": [[1, 2, 3, 4]], "obj_traj": [[1, 2, 3, 4]]}'
  data = ('{"results": {"1": [' + ", ".join([rec] * 200) + "]}}").encode()
  want = _events(data, False, 512, False, False)
  assert [e[0] for e in want] == ["video", "end"] and len(want[0][4]) == 200
  heads.clear()
  assert _events(data, False, 512, True, False) == want
  assert fastjson.MAX_MISSES == 3
  assert heads.count(True) == 3  # the window grows 2x per call: 6 calls before it holds all
  assert heads.count(False) > 3 + 3


def test_two_threads_by_default_only_with_two_cpus(monkeypatch):
  seen = []
  real = fastjson._scan  # pylint: disable=protected-access

  def spy(*args):
    seen.append(args[-1])
    return real(*args)

  monkeypatch.setattr(fastjson, "_scan", spy)
  data = b'{"results": {}}'
  for cpus, want in ((1, False), (2, True)):
    monkeypatch.setattr(fastjson.os, "sched_getaffinity", lambda _, n=cpus: set(range(n)))
    assert [k for k, _ in fastjson.scan_document(data)] == ["end"]
    assert seen.pop() is want
  monkeypatch.delattr(fastjson.os, "sched_getaffinity")  # macOS: no affinity
  monkeypatch.setattr(fastjson.os, "cpu_count", lambda: 8)
  list(fastjson.scan_document(data))
  assert seen.pop() is True
