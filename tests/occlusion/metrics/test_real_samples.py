"""Occlusion readers and aggregation on real files written outside this project.

The files live in `../shared/real_samples/` next to the repository root
(SOURCES.md there names each repository and commit); they are used from
there, never copied in.  What is checked:

* the 200 BSDS-ownership GT .mat files of DOC's `BSDSConverted` (two
  annotators each, an extra `gt_all` field, angles quantised, exactly +pi on
  74,062 of 1,280,229 annotated pixels), read by the builder's reader, one
  built into an example with its real BSDS300 image, and all 200 scored
  through the CLI;
* doobscripts' own result tables of DOOBNet on PIOD and BSDS-ownership,
  turned by our aggregation into DOOBNet's published ODS / OIS / AP;
* DOC's released PIOD prediction maps (`doc_edge/`, `doc_ori/`), read by
  the `doob_mat` reader and scored.
"""

import glob
import json
import os

import numpy as np
import pytest
import scipy.io

from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import realoob_io as io
from relations.occlusion.data.occlusion_boundaries import (
  occlusion_boundaries_dataset_builder as bld,
)
from relations.occlusion.metrics import cli as occlusion_cli
from relations.occlusion.metrics import doob_tables
from relations.occlusion.metrics import nms
from relations.occlusion.metrics import pred_readers

_ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
# RELATIONS_REAL_SAMPLES: for a checkout that is not beside shared/ (a worktree).
REAL = os.environ.get("RELATIONS_REAL_SAMPLES") or os.path.join(
  _ROOT, "..", "shared", "real_samples"
)


def _real(*p):
  path = os.path.join(REAL, *p)
  assert os.path.exists(path), f"{path}: real sample missing (see shared/real_samples/SOURCES.md)"
  return path


def _cli(capsys, *args):
  rc = occlusion_cli.main(["--plot", "", *map(str, args)])
  cap = capsys.readouterr()
  assert rc == 0, cap.err
  return cap.out


def test_bsds_ownership_200_real_gt_read_built_scored(tmp_path, capsys):
  files = sorted(glob.glob(os.path.join(_real("bsds_ownership"), "*fg", "*.mat")))
  assert len(files) == 200
  flat, pred = tmp_path / "flat", str(tmp_path / "pred")
  os.makedirs(flat)
  pixels = plus_pi = 0
  for path in files:
    anns = occlusion_formats.read_bsds_ownership(path)
    assert len(anns) == 2
    for a in anns:
      assert np.array_equal(a["valid"], a["boundaries"])  # every angle valid, +pi too
      pixels += int(a["boundaries"].sum())
      # The files store exactly +pi (never -pi); it stays +pi.
      plus_pi += int((a["orientation"][a["boundaries"]] == np.float32(np.pi)).sum())
    image_id = os.path.basename(path)[:-4]
    os.symlink(path, flat / f"{image_id}.mat")
    # Prediction: annotator 1 with its own angle.
    io.write_prediction(pred, image_id, anns[0]["boundaries"], anns[0]["orientation"])
  assert (pixels, plus_pi) == (1280229, 74062)  # counted on the raw files
  raw = scipy.io.loadmat(files[0])["gtStruct"][0, 0]
  assert set(raw.dtype.names) == {"gt_theta", "gt_all"}
  edge, theta = raw["gt_theta"][0, 0][..., 0] == 1, raw["gt_theta"][0, 0][..., 1]
  assert round(float((theta[edge] == np.pi).mean()), 3) == 0.111  # 103041: 11.1 % at +pi
  # Built: the one real BSDS300 image with its GT, through the builder's reader.
  root = tmp_path / "root"
  os.makedirs(root / "BSDS300" / "images")
  os.symlink(_real("bsds_ownership", "testfg"), root / "testfg")
  os.symlink(_real("bsds_ownership", "BSDS300", "images", "train"), root / "BSDS300/images/train")
  ((key, ex),) = bld._read_item(("bsds", str(root), ("testfg", "159091")))
  assert key == "159091" and ex["boundaries"].shape == (2, 321, 481)
  assert ex["image"].endswith("159091.jpg")
  # Scored through the CLI: every prediction pixel is an annotator-1 pixel
  # with its angle, so boundary and O precision are exactly 1 at every
  # threshold (both annotators counted; recall is below 1).
  out = tmp_path / "m.json"
  text = _cli(capsys, "--gt", flat, "--pred", pred, "--output", out)
  m = json.load(open(out))
  assert m["num_images"] == 200 and m["gt_format"] == "bsds_ownership" and m["o_curve"] == "poc"
  assert m["curves"]["boundary"]["P"] == [1.0] * 99
  assert m["curves"]["poc"]["P"] == [1.0] * 99
  assert 0.9 < m["B-ODS"] < 1 and m["O-ODS"] == m["B-ODS"]
  assert "(200 images, gt=bsds_ownership" in text


# DOOBNet's published numbers (ECCV 2018, Table 1 / 2): (ODS, OIS, AP).
PUBLISHED = {
  ("PIOD", "e"): (0.736, 0.746, 0.723),
  ("PIOD", "poc"): (0.702, 0.712, 0.683),
  ("BSDSOwnership", "e"): (0.647, 0.668, 0.539),
  ("BSDSOwnership", "poc"): (0.555, 0.570, 0.440),
}


@pytest.mark.parametrize("dataset", ["PIOD", "BSDSOwnership"])
def test_doobscripts_tables_give_doobnet_published_numbers(dataset):
  directory = _real("doobnet_eval", dataset, "DOOBNet")
  n_img = {"PIOD": 925, "BSDSOwnership": 100}[dataset]
  for curve in ("e", "poc", "aoc", "o"):
    t = doob_tables.read(directory, f"_occ_{curve}")
    assert t["img"].shape == (n_img, 5)
    np.testing.assert_array_equal(t["img"][:, 0], np.arange(1, n_img + 1))
    # Our ODS search and AP on the table's curve = doobscripts' summary row
    # to its printed 6 significant digits.  The table's R and P are rounded
    # to 6 digits, which can move the argmax of the flat F by an
    # interpolation step or two (T 1e-4, R / P < 1e-4) without changing F.
    ours = doob_tables.ods_ap_from_thr(t["thr"])
    s = t["summary"]
    assert ours["ODS"] == pytest.approx(s[3], abs=2e-6), curve
    assert ours["ODS_R"] == pytest.approx(s[1], abs=2e-4), curve
    assert ours["ODS_P"] == pytest.approx(s[2], abs=2e-4), curve
    assert ours["ODS_T"] == pytest.approx(s[0], abs=3e-4), curve
    assert ours["AP"] == pytest.approx(s[7], abs=2e-6), curve
    if (dataset, curve) in PUBLISHED:
      ods, ois, ap = PUBLISHED[dataset, curve]
      assert (round(ours["ODS"], 3), round(s[6], 3), round(ours["AP"], 3)) == (ods, ois, ap)


def test_doc_released_piod_maps_read_and_scored(tmp_path, capsys):
  doc = _real("piod", "doc_output")
  got = pred_readers.read(doc, "doob_mat", "2008_000123")
  edge = scipy.io.loadmat(os.path.join(doc, "doc_edge", "2008_000123.mat"))["edgemap"]
  occ = scipy.io.loadmat(os.path.join(doc, "doc_ori", "2008_000123.mat"))["occmap"]
  assert got["boundaries"].shape == got["orientation"].shape == (333, 500)
  np.testing.assert_array_equal(got["boundaries"], edge)
  np.testing.assert_array_equal(got["orientation"], occ)
  # GT = DOC's own NMS map at 0.5 with DOC's angles: at threshold 0.5 the
  # prediction is exactly the GT, so B-ODS = O-ODS = 1.
  gt = nms.edge_nms(edge) >= np.float32(0.5)
  io.write_gt(str(tmp_path / "gt"), "2008_000123", gt, np.where(gt, occ, 0), gt)
  out = tmp_path / "m.json"
  _cli(
    capsys,
    "--gt",
    tmp_path / "gt",
    "--pred",
    doc,
    "--pred-format",
    "doob_mat",
    "--border",
    "0",
    "--all-orientations",
    "--output",
    out,
    "--workers",
    "1",
  )
  m = json.load(open(out))
  assert m["B-ODS"] == pytest.approx(1) and m["O-ODS"] == pytest.approx(1)
  assert 0 < m["AC"] < 1
