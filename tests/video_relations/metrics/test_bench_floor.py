"""The VRD bench's floor parsers count every number of a document, as json.loads sees them."""

import importlib.util
import json
import os
import random
import subprocess
import sys

_BENCH = os.path.join(
  os.path.dirname(__file__), "..", "..", "..", "bench", "video_relations_eval.py"
)


def _floor_script():
  spec = importlib.util.spec_from_file_location("video_relations_eval", _BENCH)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module._FLOOR  # pylint: disable=protected-access


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


def test_floor_parsers_count_the_numbers_json_loads_reads(tmp_path):
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
  script = _floor_script()
  for mode in ("parse", "wparse", "wparse2"):
    out = subprocess.run(
      [sys.executable, "-c", script, mode, str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert f": {want} numbers, {len(text)} bytes" in out, (mode, out)
