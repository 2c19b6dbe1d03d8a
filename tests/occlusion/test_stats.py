"""`python -m relations.occlusion.stats` (RealOOB Table 2) on known images and the dummy release."""

import json
import os

import numpy as np
import pytest

from relations.datasets import prepare
from relations.occlusion import stats
from relations.occlusion.data import realoob_io
from relations.occlusion.data.occlusion_boundaries import make_dummy_data


def test_image_stats_known_square():
  img = np.zeros((40, 50, 3), np.uint8)
  img[10:30, 15:35] = 255  # a white square: Canny finds its outline
  b = np.zeros((40, 50), bool)
  b[10, 15:35] = b[29, 15:35] = b[10:30, 15] = b[10:30, 34] = True  # 76 px
  b[2, 2] = True  # far from any edge
  valid = b.copy()
  valid[10:30, 15] = False  # 20 invalid
  c = stats.image_stats(img, b, valid)
  assert c["pixels"] == 2000 and c["ob"] == 77 and c["valid"] == 57
  assert c["ob_near_canny"] == 76 and 60 <= c["canny"] <= 90
  row = stats.summarize([c, c])
  assert row["images"] == 2 and row["OB pixels"] == 154 and row["OB / image"] == 77
  assert row["density"] == pytest.approx(77 / 2000)
  assert row["near Canny"] == pytest.approx(76 / 77)
  assert row["valid orientation"] == pytest.approx(57 / 77)
  assert row["OB / Canny"] == pytest.approx(77 / c["canny"])
  # No edge at all: nothing is near Canny, the ratio is undefined.
  flat = stats.image_stats(np.zeros_like(img), b, valid)
  assert flat["canny"] == 0 and flat["ob_near_canny"] == 0
  assert np.isnan(stats.summarize([flat])["OB / Canny"])


def test_stats_cli_on_built_dummy_release(tmp_path, capsys):
  data_dir = str(tmp_path / "tfds")
  assert (
    prepare.main(
      ["occlusion_boundaries/realoob", "--manual_dir", make_dummy_data.HERE, "--data_dir", data_dir]
    )
    == 0
  )
  capsys.readouterr()
  out = tmp_path / "s.json"
  assert stats.main(["--data_dir", data_dir, "--output", str(out)]) == 0
  text = capsys.readouterr().out
  row = json.load(open(out))
  root = os.path.join(make_dummy_data.HERE, "realoob")
  ids = realoob_io.read_split(root, "train") + realoob_io.read_split(root, "test")
  gts = [realoob_io.read_gt(root, i) for i in ids]
  assert row["images"] == len(ids) == 5  # the hard negative is not counted
  assert row["OB pixels"] == sum(int(g["boundaries"].sum()) for g in gts)
  assert row["valid orientation"] == pytest.approx(
    sum(int(g["valid"].sum()) for g in gts) / row["OB pixels"]
  )
  assert row["border"] == 2 and "OB / Canny" in text
  assert stats.main(["--data_dir", data_dir, "--splits", "val"]) == 2
  assert "unknown split(s) ['val']" in capsys.readouterr().err
