"""Optional `sources.txt` in the RealOOB layout: per-source metrics and the stratified split."""

import json

import pytest

from relations.occlusion.data import realoob_io as io
from relations.occlusion.data import split as split_tool
from relations.occlusion.metrics import api
from relations.occlusion.metrics import cli as occlusion_cli
from tests.occlusion.metrics import test_cli


def test_stratified_split_gives_realoob_390_130():
  counts = {"DIODE": 200, "EntitySeg": 271, "PIOD": 40, "LF4D": 9}
  sources = {f"{s}_{k:03d}": s for s, n in counts.items() for k in range(n)}
  train, test = split_tool.stratified_split(sources, 0.25, seed=0)
  assert (len(train), len(test)) == (390, 130)
  per = {s: sum(sources[i] == s for i in test) for s in counts}
  assert per == {"DIODE": 50, "EntitySeg": 68, "PIOD": 10, "LF4D": 2}
  assert not set(train) & set(test) and set(train) | set(test) == set(sources)
  assert split_tool.stratified_split(sources, 0.25, seed=0) == (train, test)  # deterministic
  assert split_tool.stratified_split(sources, 0.25, seed=1)[1] != test


def test_per_source_metrics_and_split_cli(tmp_path, capsys):
  test_cli._write(str(tmp_path), n=3)
  gt = str(tmp_path / "gt")
  io.write_sources(gt, {"im0": "DIODE", "im1": "DIODE", "im2": "PIOD"})
  assert io.read_sources(gt) == {"im0": "DIODE", "im1": "DIODE", "im2": "PIOD"}
  out = tmp_path / "m.json"
  rc = occlusion_cli.main(
    [
      "--gt",
      gt,
      "--pred",
      str(tmp_path / "pred"),
      "--output",
      str(out),
      "--plot",
      "",
      "--workers",
      "1",
    ]
  )
  assert rc == 0
  text = capsys.readouterr().out
  m = json.load(open(out))
  assert set(m["per_source"]) == {"DIODE", "PIOD"}
  assert m["per_source"]["DIODE"]["num_images"] == 2 and "DIODE (2)" in text
  # A source's numbers are those of scoring its images alone.
  alone = api.evaluate_dir(gt, str(tmp_path / "pred"), ids=["im2"], num_workers=1)
  for k in api.HEADLINE:
    assert m["per_source"]["PIOD"][k] == pytest.approx(alone[k])
  # The split tool writes splits/ stratified by source.
  assert split_tool.main(["--root", gt, "--test_fraction", "0.5"]) == 0
  assert "total" in capsys.readouterr().out
  test = io.read_split(gt, "test")
  assert len(test) == 1 and test[0] in ("im0", "im1")  # DIODE round(1.0) = 1, PIOD round(0.5) = 0
  assert sorted(io.read_split(gt, "train") + test) == ["im0", "im1", "im2"]
  # Malformed sources.txt: named with its line.
  with open(tmp_path / "gt" / "sources.txt", "a") as f:
    f.write("im9 DIODE extra\n")
  rc = occlusion_cli.main(
    ["--gt", gt, "--pred", str(tmp_path / "pred"), "--plot", "", "--workers", "1"]
  )
  assert rc == 2 and "sources.txt: line 4" in capsys.readouterr().err
