"""Other tools' prediction files, boundary-only scoring, IOBE thresholds, doobscripts tables.

Each reader is fed files written the way that tool writes them:
DOOBNet / OFNet `scipy.io.savemat(<id>.mat, {"edge_ori": {"edge", "ori"}})`,
MT-ORL / IOBE 8-bit PNGs (boundary black on white, orientation png * 2 pi
/ 255), P2ORM `Image.fromarray(uint8(prob * 255))` and
`uint8((ori / 3.1416 + 1) / 2 * 255)`.  Known answers come from the PIOD
fixture of test_cli_formats (three fragments, 170 pixels).
"""

import json
import os

import cv2
import numpy as np
import pytest
import scipy.io

from relations.occlusion.data import realoob_io as io
from relations.occlusion.metrics import api
from relations.occlusion.metrics import cli as occlusion_cli
from relations.occlusion.metrics import doob_tables
from relations.occlusion.metrics import pred_readers
from tests.occlusion.metrics import test_cli_formats as tcf

P2ORM_PI = 3.1416  # the constant P2ORM's visualizer uses


def _write_tool(fmt, root, image_id, edge, theta):
  """Writes one prediction as `fmt`'s tool does."""
  os.makedirs(root, exist_ok=True)
  prob = np.asarray(edge, np.float32)
  theta = np.asarray(theta, np.float64)
  if fmt == "ours":
    io.write_prediction(root, image_id, prob, theta)
  elif fmt == "doob_mat":
    ori = np.mod(theta + np.pi, 2 * np.pi) - np.pi  # a network's atan2 range
    scipy.io.savemat(
      os.path.join(root, f"{image_id}.mat"),
      {"edge_ori": {"edge": prob, "ori": ori.astype(np.float32)}},
    )
  elif fmt == "mtorl_png":
    ob = np.rint(255 - prob * 255).astype(np.uint8)  # black boundary on white
    oo = np.rint(np.mod(theta, 2 * np.pi) / (2 * np.pi) * 255).astype(np.uint8)
    cv2.imwrite(os.path.join(root, f"{image_id}_ob.png"), ob)
    cv2.imwrite(os.path.join(root, f"{image_id}_oo.png"), oo)
  elif fmt == "p2orm_png":
    ori = np.clip(np.mod(theta + np.pi, 2 * np.pi) - np.pi, -P2ORM_PI, P2ORM_PI)
    images = os.path.join(root, "images")
    os.makedirs(images, exist_ok=True)
    cv2.imwrite(os.path.join(images, f"{image_id}_lab_v_g.png"), (prob * 255.0).astype(np.uint8))
    cv2.imwrite(
      os.path.join(images, f"{image_id}_lab_v_g_ori.png"),
      ((ori / P2ORM_PI + 1) / 2.0 * 255.0).astype(np.uint8),
    )
  else:
    raise ValueError(fmt)


def _run(capsys, *args):
  rc = occlusion_cli.main(["--workers", "1", "--plot", "", *map(str, args)])
  cap = capsys.readouterr()
  return rc, cap.out, cap.err


@pytest.fixture(scope="module")
def piod_gt(tmp_path_factory):
  gt = tmp_path_factory.mktemp("piod") / "flat"
  tcf._savemat_piod(str(gt / "img.mat"), [tcf.F1, tcf.F2, tcf.F3])
  return gt


@pytest.mark.parametrize("fmt", pred_readers.PRED_FORMATS)
def test_each_reader_scores_known_answers(fmt, piod_gt, tmp_path, capsys):
  cases = {  # name: (pred maps, B-ODS, O-ODS)
    "exact": (tcf._maps([tcf.F1, tcf.F2, tcf.F3]), 1, 1),
    "F2_flipped": (
      tcf._maps([tcf.F1, tcf.F2, tcf.F3], flip=(1,)),
      1,
      2 * (90 / 170) / (1 + 90 / 170),
    ),
  }
  for name, ((edge, theta), b_ods, o_ods) in cases.items():
    pred = tmp_path / name
    _write_tool(fmt, str(pred), "img", edge, theta)
    out = tmp_path / f"{name}.json"
    rc, text, err = _run(
      capsys, "--gt", piod_gt, "--pred", pred, "--pred-format", fmt, "--output", out
    )
    assert rc == 0, err
    m = json.load(open(out))
    assert m["pred_format"] == fmt and f"pred={fmt}" in text
    assert m["B-ODS"] == pytest.approx(b_ods, abs=1e-12), (fmt, name)
    assert m["O-ODS"] == pytest.approx(o_ods, abs=1e-12), (fmt, name)
  # The decoded values follow the tool's convention exactly.
  edge, theta = tcf._maps([tcf.F1, tcf.F2, tcf.F3])
  got = pred_readers.read(str(tmp_path / "exact"), fmt, "img")
  assert got["boundaries"].shape == (tcf.H, tcf.W)
  np.testing.assert_array_equal(got["boundaries"] > 0.5, edge)
  d = np.angle(np.exp(1j * (got["orientation"][edge] - theta[edge])))
  assert np.abs(d).max() < 2 * np.pi / 255  # one 8-bit step at most


def test_reader_errors_name_file_and_field(piod_gt, tmp_path, capsys):
  pred = tmp_path / "p"
  edge, theta = tcf._maps([tcf.F1, tcf.F2, tcf.F3])
  _write_tool("mtorl_png", str(pred), "img", edge, theta)
  os.remove(pred / "img_oo.png")
  rc, _, err = _run(capsys, "--gt", piod_gt, "--pred", pred, "--pred-format", "mtorl_png")
  assert rc == 2 and "img: missing" in err and "img_orientation.png (orientation)" in err
  os.makedirs(tmp_path / "m")
  scipy.io.savemat(str(tmp_path / "m" / "img.mat"), {"edge_ori": {"edge": edge.astype(np.float32)}})
  rc, _, err = _run(capsys, "--gt", piod_gt, "--pred", tmp_path / "m", "--pred-format", "doob_mat")
  assert rc == 2 and "img.mat: edge_ori has no field 'ori'" in err
  _write_tool("p2orm_png", str(tmp_path / "small"), "img", edge[:50], theta[:50])
  rc, _, err = _run(
    capsys, "--gt", piod_gt, "--pred", tmp_path / "small", "--pred-format", "p2orm_png"
  )
  assert rc == 2 and "sizes differ" in err and "50x128" in err


def test_no_orientation_gt_as_prediction_o_metrics_absent(tmp_path, capsys):
  """Boundary-only scoring: O-* null in JSON, "-" in the table (Table 3)."""
  rng = np.random.default_rng(5)
  from relations.occlusion.metrics import synthetic  # pylint: disable=g-import-not-at-top

  gt_dir, pred_dir = str(tmp_path / "gt"), str(tmp_path / "pred")
  for i in range(2):
    gt = synthetic.make_scene(rng, 64, 80, num_shapes=4)
    io.write_gt(gt_dir, f"im{i}", gt["boundaries"], gt["orientation"], gt["valid"])
    io.write_prediction(pred_dir, f"im{i}", gt["boundaries"].astype(np.float32))  # GT as prediction
  out = tmp_path / "eval" / "m.json"
  rc, text, err = _run(
    capsys, "--gt", gt_dir, "--pred", pred_dir, "--no-orientation", "--output", out
  )
  assert rc == 0, err
  m = json.load(open(out))
  assert m["O-ODS"] is None and m["O-OIS"] is None and m["O-AP"] is None
  assert m["o_curve"] is None and set(m["curves"]) == {"boundary"}
  assert m["B-ODS"] == pytest.approx(1.0) and m["B-OIS"] == pytest.approx(1.0)
  row = text.splitlines()[1].split()
  assert row[-3:] == ["-", "-", "-"] and row[1] == "1.000"
  # Boundary-only doobscripts tables (no _occ_ set).
  assert sorted(n for n in os.listdir(tmp_path / "eval") if n.endswith(".txt")) == [
    "eval_bdry.txt",
    "eval_bdry_img.txt",
    "eval_bdry_thr.txt",
  ]
  # The API infers it from samples without theta_pred.
  s = io.read_gt(gt_dir, "im0")
  res = api.evaluate_arrays(
    [{"prob": s["boundaries"].astype(np.float32), "gts": [s["boundaries"]]}], num_workers=1
  )
  assert res["O-ODS"] is None and res["B-ODS"] == pytest.approx(1.0)


def test_iobe_thresholds_known_answer(piod_gt, tmp_path, capsys):
  # A binary prediction: 99 thresholds see the same pixels, so R is constant
  # and the BSDS AP is 0; IOBE's set adds R = P = 0 rows at 0.01-0.50.
  edge, theta = tcf._maps([tcf.F1, tcf.F2, tcf.F3])
  tcf._predict(tmp_path / "p", "img", edge, theta)
  res = {}
  for ts in ("99", "iobe"):
    out = tmp_path / f"{ts}.json"
    rc, _, err = _run(
      capsys, "--gt", piod_gt, "--pred", tmp_path / "p", "--thresholds", ts, "--output", out
    )
    assert rc == 0, err
    res[ts] = json.load(open(out))
    assert res[ts]["threshold_set"] == ts
  assert res["99"]["B-AP"] == 0 and res["99"]["B-ODS"] == pytest.approx(1)
  r = res["iobe"]["curves"]["boundary"]["R"]
  assert r[:50] == [0] * 50 and r[50:] == [1] * 49
  # AP over unique R {0, 1}: interp1 of P from 0 to 1 at 0:0.01:1, / 100.
  assert res["iobe"]["B-AP"] == pytest.approx(sum(q / 100 for q in range(101)) / 100)
  assert res["iobe"]["B-ODS"] == pytest.approx(1)
  assert res["iobe"]["B-OIS"] == pytest.approx(1)
  rc, _, err = _run(
    capsys, "--gt", piod_gt, "--pred", tmp_path / "p", "--thresholds", "iobe", "--nthresh", "33"
  )
  assert rc == 2 and "needs --nthresh 99" in err


def test_doob_tables_round_trip(tmp_path):
  """Our eval_bdry*.txt tables read back (as doobscripts' own) to our numbers."""
  from tests.occlusion.metrics import fixtures  # pylint: disable=g-import-not-at-top

  samples = fixtures.pairs()[:4]
  res = api.evaluate_arrays(samples, num_workers=1)
  written = doob_tables.write(str(tmp_path), res)
  assert len(written) == 12
  for suffix, curve in doob_tables.OCC_CURVES.items():
    t = doob_tables.read(str(tmp_path), f"_occ_{suffix}")
    c = res["curves"][curve]
    want = [c["ODS_T"], c["ODS_R"], c["ODS_P"], c["ODS"], c["OIS_R"], c["OIS_P"], c["OIS"], c["AP"]]
    np.testing.assert_allclose(t["summary"], want, rtol=1e-5, atol=1e-6)
    ours = doob_tables.ods_ap_from_thr(t["thr"])
    assert ours["AP"] == pytest.approx(c["AP"], abs=2e-6)
    # thr rows: the curve at each distinct R's first threshold, R descending.
    _, first = np.unique(c["R"], return_index=True)
    np.testing.assert_allclose(t["thr"][:, 1:3], np.c_[c["R"], c["P"]][first[::-1]], atol=1e-6)
    assert np.all(np.diff(t["thr"][:, 1]) < 0)
    np.testing.assert_array_equal(t["img"][:, 0], [1, 2, 3, 4])
  line = open(tmp_path / "eval_bdry_occ_e.txt").read()
  assert len(line) == 8 * 11 and line.endswith("\n")  # MATLAB '%10g ' x 8
