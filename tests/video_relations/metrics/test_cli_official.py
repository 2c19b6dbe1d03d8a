"""The CLI's columnar path reproduces every recorded official number.

Each fuzzed case of `official_cases.json.xz` (see test_official_fixture.py)
is written to files as a user has them - the GT JSON, a training GT JSON
holding the case's training triplets, the submission JSON (every fourth
case as `.json.xz`) - and scored by `cli.main` in-process, once per
protocol with `--zero-shot --per-video --official-lines --output`: the six
printed lines of every evaluation, its float values and each video's AP
must equal the official scorers' recorded outputs, and where the official
code raised the CLI must refuse that evaluation. Run twice: with the
default window, and with windows and output arrays so small that the
resumable scan is cut everywhere.
"""

import json
import lzma
import os
import re

import numpy as np
import pytest

from relations.video_relations.metrics import cli
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import io as vrd_io
from relations.video_relations.metrics import scoring

_FIXTURE = os.path.join(os.path.dirname(__file__), "official_cases.json.xz")
_HEADER = re.compile(r"^(all|zero_shot|generalized_zero_shot) \(\d+ videos")


def _write(tmp_path, i, case):
  gt = tmp_path / f"gt{i}.json"
  gt.write_text(json.dumps(case["groundtruth"]))
  train = tmp_path / f"train{i}.json"
  box = [[0, 0, 1, 1]]
  train.write_text(
    json.dumps(
      {
        "train": [
          {
            "triplet": t,
            "subject_tid": 0,
            "object_tid": 1,
            "duration": [0, 1],
            "sub_traj": box,
            "obj_traj": box,
          }
          for t in case["train_triplets"]
        ]
      }
    )
  )
  sub = {"version": "VERSION 1.0", "results": case["prediction"]}
  if i % 4 == 3:
    pred = tmp_path / f"sub{i}.json.xz"
    with lzma.open(pred, "wt") as f:
      json.dump(sub, f)
  else:
    pred = tmp_path / f"sub{i}.json"
    pred.write_text(json.dumps(sub))
  return str(gt), str(train), str(pred)


def _printed_lines(stdout):
  lines, name = {}, None
  for line in stdout.splitlines():
    m = _HEADER.match(line)
    if m:
      name = m.group(1)
      lines[name] = []
    elif name and line.startswith(("detection ", "tagging ")):
      lines[name].append(line)
  return lines


@pytest.mark.parametrize(
  "small",
  # Tiny windows take as long again and test the scanner's edges, which its own tests cover too.
  [
    pytest.param(False, id="default"),
    pytest.param(True, id="small_windows", marks=pytest.mark.slow),
  ],
)
def test_cli_reproduces_every_recorded_official_result(tmp_path, capsys, monkeypatch, small):
  if small:
    # Windows of a few hundred bytes and tiny output arrays: every video,
    # member and number meets a window end or a full array somewhere.
    monkeypatch.setattr(fastjson, "WINDOW", 97)
    monkeypatch.setattr(fastjson, "BLOCK", 61)
    monkeypatch.setattr(fastjson, "CAPACITY", (1, 2, 3))
  with lzma.open(_FIXTURE, "rt") as f:
    cases = json.load(f)["cases"]
  assert len(cases) >= 300
  compared = refused = 0
  failures = []
  for i, rec in enumerate(cases):
    gt, train, pred = _write(tmp_path, i, rec["case"])
    for protocol in ("helper", "vru20"):
      out = tmp_path / f"m{i}_{protocol}.json"
      rc = cli.main(
        [
          "--groundtruth",
          gt,
          "--prediction",
          pred,
          "--protocol",
          protocol,
          "--zero-shot",
          train,
          "--per-video",
          "--official-lines",
          "--output",
          str(out),
        ]
      )
      captured = capsys.readouterr()
      if rc not in (0, 1) or not out.exists():
        failures.append(f"case {i} {protocol}: rc {rc}: {captured.err}")
        continue
      m = json.loads(out.read_text())
      printed = _printed_lines(captured.out)
      for split in ("all", "zero_shot", "generalized_zero_shot"):
        off = rec["official"][f"{protocol}/{split}"]
        ours = m if split == "all" else m[split]
        where = f"case {i} {protocol}/{split}"
        if ours is None or "error" in ours:
          refused += 1
          if off["status"] != "error":
            failures.append(f"{where}: we refused, official scored")
          continue
        if off["status"] != "ok":
          failures.append(f"{where}: official raised {off['error']}, we scored")
          continue
        compared += 1
        if printed.get(split) != off["lines"]:
          failures.append(f"{where}: {printed.get(split)} != {off['lines']}")
        values = [ours[k] for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")]
        if values != off["values"]:
          failures.append(f"{where}: values {values} != {off['values']}")
        for vid, ap in off.get("video_ap", {}).items():
          got = ours["per_video_ap"][vid]
          got = repr(np.float64(got)) if protocol == "helper" else repr(round(got, 4))
          if got != ap:
            failures.append(f"{where}: video {vid} AP {got} != {ap}")
      assert (rc == 1) == any(
        (m if s == "all" else m[s] or {}).get("error") is not None
        for s in ("all", "zero_shot", "generalized_zero_shot")
      )
    for p in (gt, train, pred):
      os.remove(p)
  assert not failures, "\n".join(failures[:20])
  assert compared > 1000 and refused > 50, (compared, refused)


def test_score_file_reproduces_every_recorded_official_result(tmp_path):
  # `cli.score_file`, what the training-time evaluator scores its written submissions with:
  # the GT table and the submission file in, the official "all" numbers out.
  with lzma.open(_FIXTURE, "rt") as f:
    cases = json.load(f)["cases"]
  compared = refused = 0
  for i, rec in enumerate(cases):
    gt, _, pred = _write(tmp_path, i, rec["case"])
    table = vrd_io.read_groundtruth_table(gt)
    for protocol in ("helper", "vru20"):
      off = rec["official"][f"{protocol}/all"]
      try:
        report, res = cli.score_file(pred, table, protocol)
      except scoring.ScoringError:
        assert off["status"] == "error", f"case {i} {protocol}"
        refused += 1
        continue
      assert report.ok and off["status"] == "ok", f"case {i} {protocol}"
      assert res.official_lines() == off["lines"], f"case {i} {protocol}"
      d = res.as_dict()
      assert [d[k] for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")] == off["values"]
      compared += 1
  assert compared > 400 and refused > 0
