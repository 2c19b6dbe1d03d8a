"""`python -m relations.report`: a sweep workdir with one finished, one failed and one missing row,
written here the way `relations.sweep` and the trainer write them, in every format."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from relations import io_util
from relations import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [
  ("Image + Event + Place + PG", "Yes", "inputs=image_event_place,pg=true"),
  ("No Input", "No", "inputs=none,pg=false"),
  ("Image + PG", "No", "inputs=image,pg=true"),
]


@pytest.fixture
def workdir(tmp_path):
  w = tmp_path / "sweep"
  names = [f"{i:02d}_row{i}" for i in range(3)]
  io_util.write_json_atomic(
    str(w / "sweep.json"),
    {"config": "configs/commonsense.py:tiny", "hyper": "table2", "overrides": [], "rows": names},
  )
  for i, (mod, given, row) in enumerate(ROWS):
    d = w / names[i]
    io_util.write_json_atomic(
      str(d / "row.json"),
      {"index": i, "row": row, "labels": {"Modalities": mod, "Text Given": given}},
    )
    io_util.write_json_atomic(str(d / "config.json"), {"task": "commonsense", "total_steps": 150})
  done, failed = w / names[0], w / names[1]
  io_util.write_json_atomic(
    str(done / "train_summary.json"),
    {
      "final_step": 150,
      "val/Bleu_2": 0.1350,
      "val/METEOR": 0.1155,
      "val/CIDEr": 0.1827,
      "val/Acc@50": 0.3872,
      "val/Unique": 0.4449,
      "val/Novel": 0.4903,
      "val/Bleu_1": 0.3,  # not a Table 2 column
    },
  )
  io_util.write_json_atomic(str(done / "status.json"), {"status": "done", "wall_s": 61.4})
  io_util.write_json_atomic(
    str(failed / "status.json"),
    {"status": "failed", "returncode": 1, "log": str(failed / "train.log"), "wall_s": 3.0},
  )
  return str(w)


def test_report_marks_failed_and_missing_rows_in_the_papers_layout(workdir):
  t = report.table(workdir)
  assert t["header"] == ["Modalities", "Text Given", "B-2", "M", "C", "Acc@50", "Unique", "Novel"]
  first, bad, missing = t["lines"]
  assert first["labels"] == ["Image + Event + Place + PG", "Yes"]
  assert first["values"] == pytest.approx([13.50, 11.55, 18.27, 38.72, 44.49, 49.03])
  assert first["steps"] == 150 and first["wall_s"] == 61.4 and first["status"] == "done"
  log = os.path.join(workdir, "01_row1", "train.log")
  assert bad["status"] == f"failed (exit 1; log {log})" and bad["values"] == [None] * 6
  assert missing["status"] == "missing (not run)" and missing["labels"] == ["Image + PG", "No"]
  # A run stopped before its last step writes a summary too, without the final evaluation.
  part = os.path.join(workdir, "02_row2")
  io_util.write_json_atomic(os.path.join(part, "train_summary.json"), {"final_step": 40})
  io_util.write_json_atomic(
    os.path.join(part, "status.json"), {"status": "interrupted", "log": "L"}
  )
  assert report.table(workdir)["lines"][2]["status"] == "missing (interrupted; log L)"
  os.remove(os.path.join(part, "train_summary.json"))
  os.remove(os.path.join(part, "status.json"))

  md = report.to_markdown(t)
  assert (
    "| Image + Event + Place + PG | Yes | 13.50 | 11.55 | 18.27 | 38.72 | 44.49 | 49.03 | 150 | 61 "
    "| done |" in md
  )
  assert f"| No Input | No | - | - | - | - | - | - |  |  | failed (exit 1; log {log}) |" in md
  assert "| Image + PG | No | - | - | - | - | - | - |  |  | missing (not run) |" in md
  # The paper's rows follow as reference lines, with its GT row.
  assert (
    "| Image + Event + Place + PG | Yes | 13.50 | 11.55 | 18.27 | 38.72 | 44.49 | 49.03 |" in md
  )
  assert "| GT | - | - | - | - | - | 74.34 | 54.98 |" in md

  rows = list(csv.reader(io.StringIO(report.to_csv(t))))
  assert rows[0][:3] == ["source", "Modalities", "Text Given"]
  assert rows[1][:9] == ["sweep", "Image + Event + Place + PG", "Yes", "13.50", "11.55"] + [
    "18.27",
    "38.72",
    "44.49",
    "49.03",
  ]
  assert rows[2][-2].startswith("failed") and rows[3][-2] == "missing (not run)"
  assert [r[0] for r in rows[1:]] == ["sweep"] * 3 + ["paper"] * 17

  tex = report.to_tex(t)
  assert r"\begin{tabular}{llrrrrrrrrl}" in tex
  assert r"No Input & No & -- & -- & -- & -- & -- & -- &  &  & failed \\" in tex


def test_cli_writes_each_format_and_refuses_a_non_sweep(workdir, tmp_path):
  env = dict(os.environ, PYTHONPATH=ROOT)
  out = str(tmp_path / "t.csv")
  res = subprocess.run(
    [sys.executable, "-m", "relations.report", workdir, "--format", "csv", "--output", out],
    env=env,
    capture_output=True,
    text=True,
  )
  assert res.returncode == 0, res.stderr
  with open(out) as f:
    assert f.read() == report.to_csv(report.table(workdir))
  res = subprocess.run(
    [sys.executable, "-m", "relations.report", str(tmp_path)],
    env=env,
    capture_output=True,
    text=True,
  )
  assert res.returncode == 2
  assert f"error: {tmp_path}: no sweep.json: not a sweep workdir" in res.stderr


def test_video_rows_get_one_line_per_track_mode(tmp_path):
  w = tmp_path / "v"
  io_util.write_json_atomic(str(w / "sweep.json"), {"hyper": "ablations", "rows": ["00_a"]})
  io_util.write_json_atomic(
    str(w / "00_a" / "row.json"), {"row": "assoc=1.01", "labels": {"Setting": "association off"}}
  )
  io_util.write_json_atomic(
    str(w / "00_a" / "config.json"), {"task": "video_relations", "video": {"tracks": "both"}}
  )
  io_util.write_json_atomic(
    str(w / "00_a" / "train_summary.json"),
    {"final_step": 5, "val/groundtruth/mAP": 0.5, "val/detected/mAP": 0.25},
  )
  t = report.table(str(w))
  assert [ln["labels"] for ln in t["lines"]] == [
    ["association off", "groundtruth"],
    ["association off", "detected"],
  ]
  assert [ln["values"][0] for ln in t["lines"]] == [50.0, 25.0]
  assert json.dumps(t)  # plain data
