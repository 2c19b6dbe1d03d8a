"""The CLIs on synthetic data written in the RealOOB layout."""

import json
import os

import numpy as np

from relations.occlusion.data import realoob_io as io
from relations.occlusion.metrics import depth_cli
from relations.occlusion.metrics import cli as occlusion_cli
from relations.occlusion.metrics import api
from relations.occlusion.metrics import synthetic


def _write(root, n=3, shape=(96, 128)):
  rng = np.random.default_rng(3)
  samples = []
  for i in range(n):
    gt = synthetic.make_scene(rng, *shape, num_shapes=5)
    prob, theta = synthetic.make_prediction(rng, gt)
    io.write_gt(
      os.path.join(root, "gt"),
      f"im{i}",
      gt["boundaries"],
      gt["orientation"],
      gt["valid"],
      gt["depth"],
    )
    io.write_prediction(os.path.join(root, "pred"), f"im{i}", prob, theta)
    samples.append((gt, prob, theta))
  io.write_split(os.path.join(root, "gt"), "test", [f"im{i}" for i in range(n)])
  return samples


def test_occlusion_cli_table_json_plot(tmp_path, capsys):
  _write(str(tmp_path))
  out = str(tmp_path / "m" / "metrics.json")
  rc = occlusion_cli.main(
    [
      "--gt",
      str(tmp_path / "gt"),
      "--pred",
      str(tmp_path / "pred"),
      "--split",
      "test",
      "--output",
      out,
      "--workers",
      "1",
    ]
  )
  assert rc == 0
  text = capsys.readouterr().out
  assert "B-ODS   B-OIS    B-AP      AC   O-ODS   O-OIS    O-AP" in text
  m = json.load(open(out))
  for k in api.HEADLINE:
    assert 0 <= m[k] <= 1
  assert m["o_curve"] == "valid_poc" and m["num_images"] == 3
  assert os.path.getsize(str(tmp_path / "m" / "metrics_pr.png")) > 1000
  # The API on the decoded arrays gives the same numbers.
  res = api.evaluate_dir(str(tmp_path / "gt"), str(tmp_path / "pred"), split="test", num_workers=1)
  for k in api.HEADLINE:
    assert res[k] == m[k]
  assert f"{m['B-ODS']:.3f}" in text


def test_occlusion_cli_reports_all_problems_at_once(tmp_path, capsys):
  _write(str(tmp_path))
  os.remove(tmp_path / "pred" / "boundaries" / "im0.png")
  os.remove(tmp_path / "pred" / "orientation" / "im2.png")
  io.write_probability(str(tmp_path / "pred" / "boundaries" / "im1.png"), np.zeros((50, 50)))
  rc = occlusion_cli.main(["--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred")])
  err = capsys.readouterr().err
  assert rc == 2
  assert "3 problem(s)" in err
  assert "im0: missing" in err and "boundaries/im0.png" in err
  assert "im2: missing" in err and "orientation/im2.png" in err
  assert "im1: sizes differ" in err and "50x50" in err


def test_depth_cli_perfect_and_inverted_depth(tmp_path, capsys):
  samples = _write(str(tmp_path))
  pred = tmp_path / "depth_pred"
  os.makedirs(pred)
  for i, (gt, _, _) in enumerate(samples):
    np.save(pred / f"im{i}.npy", gt["depth"])
  rc = depth_cli.main(
    [
      "--gt",
      str(tmp_path / "gt"),
      "--depth",
      str(pred),
      "--protocols",
      "v,iii",
      "--output",
      str(tmp_path / "d.json"),
    ]
  )
  assert rc == 0
  good = json.load(open(tmp_path / "d.json"))
  assert good["coverage"] > 0.8 and good["d_ord_cond"] > 0.97
  assert "Table 5" in capsys.readouterr().out
  rc = depth_cli.main(
    [
      "--gt",
      str(tmp_path / "gt"),
      "--depth",
      str(pred),
      "--protocols",
      "v",
      "--inverse",
      "--output",
      str(tmp_path / "d2.json"),
    ]
  )
  bad = json.load(open(tmp_path / "d2.json"))
  assert bad["d_ord_cond"] < 0.03  # nearer/farther swapped
  assert abs(bad["coverage"] - good["coverage"]) < 0.1
