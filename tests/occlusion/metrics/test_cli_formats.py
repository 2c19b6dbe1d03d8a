"""The occlusion CLI on PIOD / BSDS-ownership .mat GT (and format detection).

Known answers: predictions drawn from the GT itself (probability 1 on GT
pixels), so every threshold sees the same pixels (the `edge_nms` border ramp
aside) and R, P and F follow by counting.  At 32 x 40 (the builder's dummy
data) the tolerance is 0.38 px, i.e. exact-pixel matching; the .mat files
written here are 96 x 128, where it is 1.2 px (4-neighbours match,
diagonal neighbours do not).
"""

import json
import os
import shutil

import numpy as np
import pytest
import scipy.io

from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import occlusion_boundaries
from relations.occlusion.data import realoob_io as io
from relations.occlusion.metrics import cli as occlusion_cli
from relations.occlusion.metrics import api
from relations.occlusion.metrics import gt_readers

DUMMY = os.path.join(os.path.dirname(occlusion_boundaries.__file__), "dummy_data")
H, W = 96, 128


def _run(capsys, gt, pred, *extra, out=None):
  """Runs the CLI; returns (rc, metrics JSON or None, stdout, stderr)."""
  args = ["--gt", str(gt), "--pred", str(pred), "--workers", "1", *extra]
  if out is not None:
    args += ["--output", str(out), "--plot", ""]
  rc = occlusion_cli.main(args)
  cap = capsys.readouterr()
  metrics = json.load(open(out)) if out is not None and rc == 0 else None
  return rc, metrics, cap.out, cap.err


def _predict(pred_dir, image_id, mask, theta):
  io.write_prediction(
    str(pred_dir),
    image_id,
    np.asarray(mask, np.float64),
    np.nan_to_num(np.asarray(theta, np.float64)),
  )


# ----------------------------------------------------------------------------
# Hand-written .mat files in the released structures.
# ----------------------------------------------------------------------------

# Fragments (ys, xs, stored angle): a vertical, a horizontal stored as -pi
# (internally +pi) and a diagonal; 60 + 80 + 30 = 170 pixels, none within
# the 5-pixel NMS border ramp, none within 1.2 px of another fragment.
F1 = (np.arange(10, 70), np.full(60, 20), np.pi / 2)
F2 = (np.full(80, 80), np.arange(30, 110), -np.pi)
F3 = (np.arange(30, 60), np.arange(50, 80), -np.pi / 4)
F4 = (np.arange(20, 50), np.full(30, 1), 0.3)  # inside a 2-pixel border


def _maps(frags, flip=(), shift=None):
  """(edge [H, W] bool, theta [H, W]) of fragments; `flip` adds pi."""
  edge = np.zeros((H, W), bool)
  theta = np.zeros((H, W))
  for k, (ys, xs, t) in enumerate(frags):
    dy, dx = (shift or {}).get(k, (0, 0))
    edge[ys + dy, xs + dx] = True
    theta[ys + dy, xs + dx] = t + (np.pi if k in flip else 0)
  return edge, theta


def _savemat_piod(path, frags):
  """A PIOD file as released: bndinfo_pascal with extra fields, cell ne x 1.

  Off-boundary OrientMap values are garbage (and one NaN): doobscripts
  only reads the angle at matched GT pixels.
  """
  rng = np.random.default_rng(0)
  orient = rng.uniform(-np.pi, np.pi, (H, W))
  orient[0, 0] = np.nan
  cells = np.empty((len(frags), 1), dtype=object)
  for i, (ys, xs, t) in enumerate(frags):
    orient[ys, xs] = t
    lin = xs * H + ys + 1  # 1-based column-major
    # One fragment as a uint32 row, the others as double columns.
    cells[i, 0] = lin.astype(np.uint32)[None] if i == 1 else lin.astype(np.float64)[:, None]
  bnd = {
    "imsize": np.array([[H, W]], np.float64),
    "ne": np.array([[len(frags)]], np.float64),
    "nj": np.array([[0]], np.float64),
    "edges": {"indices": cells, "spLR": np.zeros((len(frags), 2))},
    "OrientMap": orient,
    "names": np.array(["background", "object"], dtype=object),
  }
  os.makedirs(os.path.dirname(path), exist_ok=True)
  scipy.io.savemat(path, {"bndinfo_pascal": bnd})


def _savemat_bsds(path, annotators):
  """A BSDS-ownership file as released: gtStruct.gt_theta = 1 x n cell."""
  cells = np.empty((1, len(annotators)), dtype=object)
  for i, (edge, theta) in enumerate(annotators):
    cells[0, i] = np.stack([edge.astype(np.float64), theta], -1)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  scipy.io.savemat(path, {"gtStruct": {"gt_theta": cells}})


def test_piod_mat_known_answers(tmp_path, capsys):
  gt = tmp_path / "piod_flat"
  _savemat_piod(str(gt / "img.mat"), [F1, F2, F3])
  cases = {  # name: (pred maps, B-ODS, O-ODS)
    "exact": (_maps([F1, F2, F3]), 1, 1),
    "flipped": (_maps([F1, F2, F3], flip=(0, 1, 2)), 1, 0),
    "F2_flipped": (_maps([F1, F2, F3], flip=(1,)), 1, 2 * (90 / 170) / (1 + 90 / 170)),
    "shift_1px": (_maps([F1, F2, F3], shift={0: (0, 1)}), 1, 1),
    "shift_2px": (_maps([F1, F2, F3], shift={0: (0, 2)}), 110 / 170, 110 / 170),
  }
  for name, ((edge, theta), b_ods, o_ods) in cases.items():
    _predict(tmp_path / name, "img", edge, theta)
    rc, m, text, _ = _run(capsys, gt, tmp_path / name, out=tmp_path / f"{name}.json")
    assert rc == 0, name
    assert m["gt_format"] == "piod" and m["border"] == 0, name
    assert m["o_curve"] == "poc" and m["num_images"] == 1, name
    assert m["B-ODS"] == pytest.approx(b_ods, abs=1e-12), name
    assert m["B-OIS"] == pytest.approx(b_ods, abs=1e-12), name
    assert m["O-ODS"] == pytest.approx(o_ods, abs=1e-12), name
    assert m["O-OIS"] == pytest.approx(o_ods, abs=1e-12), name
    assert "gt=piod" in text and "border=0px" in text
  # Rotations by 60 / 120 degrees: within / beyond the 90-degree rule.
  for deg, o_ods in ((60, 1), (-60, 1), (120, 0), (-120, 0)):
    edge, theta = _maps([F1, F2, F3])
    name = f"rot{deg}"
    _predict(tmp_path / name, "img", edge, theta + np.deg2rad(deg))
    rc, m, _, _ = _run(capsys, gt, tmp_path / name, out=tmp_path / f"{name}.json")
    assert rc == 0 and m["B-ODS"] == pytest.approx(1, abs=1e-12)
    assert m["O-ODS"] == pytest.approx(o_ods, abs=1e-12), deg


def test_bsds_mat_three_annotators(tmp_path, capsys):
  """Recall sums over annotators; a pixel counts if it matches any one."""
  a0 = _maps([F1, F2, F3])
  a1 = _maps([F1, F2])
  a2 = _maps([F2, F3], flip=(1,), shift={0: (1, 0)})  # F2 one row lower
  gt = tmp_path / "bsds"
  _savemat_bsds(str(gt / "testfg" / "7.mat"), [a0, a1, a2])
  sum_r = 170 + 140 + 110
  cases = {
    # A0 itself: every annotator fully matched; F3 is orientation-correct
    # for A0 only, which suffices.
    "a0": (a0, 1, 1),
    # A2 (F2 one row lower, F3 flipped): matches 110 of A0, 80 of A1 and
    # all of A2; every prediction matched and orientation-correct in A2.
    "a2": (a2, 2 * (300 / sum_r) / (1 + 300 / sum_r), 2 * (300 / sum_r) / (1 + 300 / sum_r)),
    # A0 with every angle flipped: only F3 agrees, with A2.
    "a0_flipped": (_maps([F1, F2, F3], flip=(0, 1, 2)), 1, 2 * (30 / 170) / (1 + 30 / 170)),
  }
  for name, ((edge, theta), b_ods, o_ods) in cases.items():
    _predict(tmp_path / name, "7", edge, theta)
    rc, m, _, err = _run(capsys, gt, tmp_path / name, out=tmp_path / f"{name}.json")
    assert rc == 0, err
    assert m["gt_format"] == "bsds_ownership" and m["ids"] == ["7"]
    assert m["B-ODS"] == pytest.approx(b_ods, abs=1e-12), name
    assert m["O-ODS"] == pytest.approx(o_ods, abs=1e-12), name
  counts = gt_readers.evaluate_dir(str(gt), str(tmp_path / "a2"), num_workers=1)["per_image"][0]
  assert counts["cnt_r"][0] == 300 and counts["sum_r"][0] == sum_r
  assert counts["cnt_p"][0] == counts["sum_p"][0] == 110


def test_border_exclusion_off_for_mat_formats(tmp_path, capsys):
  gt = tmp_path / "piod_flat"
  _savemat_piod(str(gt / "img.mat"), [F1, F4])  # F4 at x = 1
  _predict(tmp_path / "pred", "img", *_maps([F1]))
  rc, m, _, _ = _run(capsys, gt, tmp_path / "pred", out=tmp_path / "a.json")
  assert rc == 0 and m["border"] == 0
  assert m["B-ODS"] == pytest.approx(2 * (60 / 90) / (1 + 60 / 90), abs=1e-12)
  rc, m, text, _ = _run(capsys, gt, tmp_path / "pred", "--border", "2", out=tmp_path / "b.json")
  assert rc == 0 and m["border"] == 2 and "border=2px" in text
  assert m["B-ODS"] == pytest.approx(1, abs=1e-12)


# ----------------------------------------------------------------------------
# The builder's dummy data.
# ----------------------------------------------------------------------------


def _predict_from_gt(files, fmt, pred_dir, flip=False, annotator=None):
  """Writes GT-equal predictions (union of annotators, or one of them)."""
  for image_id, path in files:
    ann = gt_readers.read_annotations(path, fmt)
    idx = range(len(ann["gts"])) if annotator is None else [annotator]
    edge = np.zeros_like(ann["gts"][0])
    theta = np.zeros(edge.shape)
    for a in reversed(list(idx)):  # the first annotator's angle wins
      theta[ann["gts"][a]] = np.nan_to_num(ann["theta_gts"][a])[ann["gts"][a]]
      edge |= ann["gts"][a]
    _predict(pred_dir, image_id, edge, theta + (np.pi if flip else 0))


def test_detect_format(tmp_path):
  expect = {
    "realoob": "realoob",
    "piod": "piod",
    "piod/Data": "piod",
    "bsds_ownership": "bsds_ownership",
    "bsds_ownership/testfg": "bsds_ownership",
  }
  for d, fmt in expect.items():
    assert gt_readers.detect_format(os.path.join(DUMMY, d)) == fmt, d
  both = tmp_path / "both"
  os.makedirs(both / "boundaries")
  os.makedirs(both / "Data")
  with pytest.raises(gt_readers.GTFormatError, match="ambiguous GT format.*realoob and piod"):
    gt_readers.detect_format(str(both))
  os.makedirs(tmp_path / "empty")
  with pytest.raises(gt_readers.GTFormatError, match="unknown GT format"):
    gt_readers.detect_format(str(tmp_path / "empty"))
  os.makedirs(tmp_path / "other")
  scipy.io.savemat(str(tmp_path / "other" / "a.mat"), {"x": np.zeros(3)})
  with pytest.raises(gt_readers.GTFormatError, match=r"a\.mat: holds neither 'bndinfo_pascal'"):
    gt_readers.detect_format(str(tmp_path / "other"))


def test_piod_dummy_perfect_flipped_and_nan_angle(tmp_path, capsys):
  root = os.path.join(DUMMY, "piod")
  files = gt_readers.list_gt_files(root, "piod")
  assert [i for i, _ in files] == ["2008_000002", "2008_000005"]  # val list
  _predict_from_gt(files, "piod", tmp_path / "pred")
  rc, m, _, _ = _run(capsys, root, tmp_path / "pred", out=tmp_path / "m.json")
  assert rc == 0
  assert (m["gt_format"], m["border"], m["o_curve"]) == ("piod", 0, "poc")
  assert m["ids"] == ["2008_000002", "2008_000005"]
  assert m["B-ODS"] == pytest.approx(1, abs=1e-12)
  assert m["B-OIS"] == pytest.approx(1, abs=1e-12)
  # 2008_000002 (20, 4) is a boundary pixel stored with a NaN angle: it is
  # matched but never orientation-correct, so O-P = (N - 1) / N, R = 1.
  n = 116 + 124
  assert m["O-ODS"] == pytest.approx(2 * (n - 1) / (2 * n - 1), abs=1e-12)
  res = gt_readers.evaluate_dir(root, str(tmp_path / "pred"), num_workers=1)
  c = res["per_image"][0]
  assert (c["sum_p"][0], c["cnt_p"][0], c["cnt_r"][0], c["sum_r"][0], c["cnt_p_occ"][0]) == (
    116,
    116,
    116,
    116,
    115,
  )
  # Flipped angles: every pixel localised, none correctly oriented.
  _predict_from_gt(files, "piod", tmp_path / "flip", flip=True)
  rc, m, _, _ = _run(capsys, root, tmp_path / "flip", out=tmp_path / "f.json")
  assert rc == 0 and m["B-ODS"] == pytest.approx(1, abs=1e-12)
  assert m["O-ODS"] == m["O-OIS"] == m["O-AP"] == 0
  # --split train reads the other Data/*.mat files.
  train = gt_readers.list_gt_files(root, "piod", "train")
  assert [i for i, _ in train] == ["2008_000001", "2008_000003", "2008_000004"]


def test_bsds_dummy_annotator_union_and_subset(tmp_path, capsys):
  root = os.path.join(DUMMY, "bsds_ownership")
  files = gt_readers.list_gt_files(root, "bsds_ownership")
  assert [i for i, _ in files] == ["100007", "105025"]  # testfg/
  _predict_from_gt(files, "bsds_ownership", tmp_path / "union")
  rc, m, _, _ = _run(capsys, root, tmp_path / "union", out=tmp_path / "u.json")
  assert rc == 0 and m["gt_format"] == "bsds_ownership" and m["border"] == 0
  for k in ("B-ODS", "B-OIS", "O-ODS", "O-OIS"):
    assert m[k] == pytest.approx(1, abs=1e-12), k
  # Annotator 2 alone (it drops the left third; 100007 (9, 31) is its own):
  # P = 1 and R = (|A1 & A2| + |A2|) / (|A1| + |A2|) over both images.
  _predict_from_gt(files, "bsds_ownership", tmp_path / "a2", annotator=1)
  num = den = 0
  for _, path in files:
    a, b = (x["boundaries"] for x in occlusion_formats.read_bsds_ownership(path))
    num += (a & b).sum() + b.sum()
    den += a.sum() + b.sum()
  r = num / den
  rc, m, _, _ = _run(capsys, root, tmp_path / "a2", out=tmp_path / "a.json")
  assert rc == 0 and 0.5 < r < 0.9
  assert m["B-ODS"] == pytest.approx(2 * r / (1 + r), abs=1e-12)
  assert m["B-OIS"] == pytest.approx(2 * r / (1 + r), abs=1e-12)


def test_bsds_dummy_cli_equals_array_api(tmp_path, capsys):
  """Plumbing: the CLI equals `api.evaluate_arrays` on the decoded arrays."""
  root = os.path.join(DUMMY, "bsds_ownership")
  rng = np.random.default_rng(5)
  samples = []
  for image_id in ("100007", "105025"):
    anns = occlusion_formats.read_bsds_ownership(os.path.join(root, "testfg", image_id + ".mat"))
    b = anns[0]["boundaries"]
    prob = np.clip(0.8 * b + rng.uniform(0, 0.5, b.shape), 0, 1)
    theta = np.where(rng.uniform(size=b.shape) < 0.2, np.pi, 0) + anns[0]["orientation"]
    _predict(tmp_path / "pred", image_id, prob, theta)
    pr = io.read_prediction(str(tmp_path / "pred"), image_id)
    samples.append(
      dict(
        prob=pr["boundaries"],
        theta_pred=pr["orientation"],
        gts=[a["boundaries"] for a in anns],
        theta_gts=[a["orientation"] for a in anns],
      )
    )
  rc, m, _, _ = _run(capsys, root, tmp_path / "pred", out=tmp_path / "m.json")
  assert rc == 0
  ref = api.evaluate_arrays(samples, border=0, num_workers=1)
  for k in api.HEADLINE:
    assert m[k] == ref[k], k
  assert 0.3 < m["B-ODS"] < 1 and 0.2 < m["O-ODS"] < m["B-ODS"]


def test_realoob_dummy_keeps_its_defaults(tmp_path, capsys):
  root = os.path.join(DUMMY, "realoob")
  for image_id in io.read_split(root, "test"):
    gt = io.read_gt(root, image_id)
    _predict(tmp_path / "pred", image_id, gt["boundaries"], gt["orientation"])
  rc, m, _, _ = _run(capsys, root, tmp_path / "pred", "--split", "test", out=tmp_path / "m.json")
  assert rc == 0
  assert (m["gt_format"], m["border"], m["o_curve"]) == ("realoob", 2, "valid_poc")
  for k in ("B-ODS", "B-OIS", "O-ODS", "O-OIS"):
    assert m[k] == pytest.approx(1, abs=1e-12), k


def test_problems_reported_by_id_all_at_once(tmp_path, capsys):
  root = tmp_path / "piod"
  shutil.copytree(os.path.join(DUMMY, "piod"), root)
  files = gt_readers.list_gt_files(str(root), "piod", "train") + gt_readers.list_gt_files(
    str(root), "piod", "test"
  )
  _predict_from_gt(files, "piod", tmp_path / "pred")
  (root / "Data" / "2008_000001.mat").write_bytes(b"not a mat file")
  os.remove(tmp_path / "pred" / "boundaries" / "2008_000003.png")
  io.write_orientation(
    str(tmp_path / "pred" / "orientation" / "2008_000004.png"), np.zeros((10, 12))
  )
  rc, _, _, err = _run(capsys, root, tmp_path / "pred", "--split", "train")
  assert rc == 2
  assert "3 problem(s)" in err
  assert "2008_000001: " in err and "2008_000001.mat: not a readable" in err
  assert "2008_000003: missing" in err and "boundaries/2008_000003.png" in err
  assert "2008_000004: sizes differ" in err and "10x12" in err
  assert "32x40" in err
  # A listed test id without its annotation (and without a prediction).
  with open(root / "val_doc_2010.txt", "a") as f:
    f.write("2008_000009\n")
  rc, _, _, err = _run(capsys, root, tmp_path / "pred")
  assert rc == 2 and "3 problem(s)" in err
  assert "2008_000009: " in err and "2008_000009.mat: annotation file is missing" in err
  assert "2008_000009: missing" in err and "orientation/2008_000009" in err
  # A BSDS folder holding a PIOD file names the file and the variable.
  os.makedirs(tmp_path / "flat")
  shutil.copy(
    os.path.join(DUMMY, "piod", "Data", "2008_000002.mat"), tmp_path / "flat" / "2008_000002.mat"
  )
  rc, _, _, err = _run(
    capsys, tmp_path / "flat", tmp_path / "pred", "--gt-format", "bsds_ownership"
  )
  assert rc == 2 and "no variable 'gtStruct'" in err
  # Unknown split, ambiguous directory.
  rc, _, _, err = _run(capsys, root, tmp_path / "pred", "--split", "val")
  assert rc == 2 and "splits 'test' and 'train', got 'val'" in err
  os.makedirs(root / "boundaries")
  rc, _, _, err = _run(capsys, root, tmp_path / "pred")
  assert rc == 2 and "ambiguous" in err and "--gt-format" in err
