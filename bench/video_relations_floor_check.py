"""Checks that the VRD bench's floor parsers count every number of a document as json.loads does.

  python bench/video_relations_floor_check.py

The floor of bench/video_relations_eval.py is only a reference line, so this check lives with
the benches (run it after changing `_FLOOR`), not in the test suite: tests and benches do not
import each other.
"""

import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import video_relations_eval  # pylint: disable=g-import-not-at-top  (this directory)


def _numbers(value):
  if isinstance(value, bool):
    return 0
  if isinstance(value, (int, float)):
    return 1
  if isinstance(value, list):
    return sum(map(_numbers, value))
  if isinstance(value, dict):
    return sum(map(_numbers, value.values()))
  return 0


def check_floor_parsers(tmp_path: pathlib.Path):
  """Raises AssertionError unless every floor mode counts json.loads's numbers and bytes."""
  rng = random.Random(0)
  shapes = [
    lambda: repr(round(rng.uniform(-2000, 2000), rng.randrange(4))),
    lambda: repr(rng.uniform(-1, 1) * 10.0 ** rng.randrange(-30, 30)),
    lambda: str(rng.randrange(-(10**12), 10**12)),
    lambda: rng.choice(["0", "-0", "1e5", "-2.5E-3", "12345678.123456789", "true", "false"]),
  ]
  videos = {}
  for v in range(40):
    preds = []
    for _ in range(rng.randrange(1, 6)):
      boxes = ", ".join(
        "[" + ", ".join(rng.choice(shapes)() for _ in range(4)) + "]"
        for _ in range(rng.randrange(0, 30))
      )
      name = rng.choice(['"a1"', '"12 [3, 4]"', '"-7.5"'])  # no escapes: the case has none
      preds.append(
        f'{{"triplet": [{name}, "b", "c"], "score": {rng.random()!r}, "sub_traj": [{boxes}]}}'
      )
    videos[f"{v}"] = "[" + ", ".join(preds) + "]"
  text = '{"results": {' + ", ".join(f'"{k}": {v}' for k, v in videos.items()) + "}}"
  path = tmp_path / "doc.json"
  path.write_text(text)
  want = _numbers(json.loads(text))
  script = video_relations_eval._FLOOR  # pylint: disable=protected-access
  for mode in ("parse", "parse2"):
    out = subprocess.run(
      [sys.executable, "-c", script, mode, str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert f": {want} numbers, {len(text)} bytes" in out, (mode, out)
    print(f"{mode}: ok ({want} numbers)")


if __name__ == "__main__":
  with tempfile.TemporaryDirectory() as tmp:
    check_floor_parsers(pathlib.Path(tmp))
