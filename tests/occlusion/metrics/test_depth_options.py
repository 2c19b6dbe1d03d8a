"""Depth-probe CLI options: --upsample bilinear and --gt-depth-only."""

import json
import os

import numpy as np

from relations.occlusion.metrics import depth_cli
from tests.occlusion.metrics import test_cli


def test_upsample_bilinear_half_pixel_centres_and_missing():
  d = np.tile(np.arange(1.0, 5.0), (2, 1))  # [2, 4]: 1 2 3 4
  up = depth_cli.upsample_bilinear(d, (4, 8))
  np.testing.assert_allclose(up[0], [1.0, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.0])
  np.testing.assert_allclose(up, np.tile(up[0], (4, 1)))
  d[:, 1] = 0  # missing: every output pixel that weighs it is missing
  up = depth_cli.upsample_bilinear(d, (4, 8))
  np.testing.assert_array_equal(up[0] > 0, [True, False, False, False, False, True, True, True])


def _main(*args):
  return depth_cli.main([str(a) for a in args])


def test_depth_cli_upsample_and_gt_depth_subset(tmp_path, capsys):
  samples = test_cli._write(str(tmp_path))  # 3 images 96 x 128 with GT depth
  gt = tmp_path / "gt"
  half, full = tmp_path / "half", tmp_path / "full"
  os.makedirs(half)
  os.makedirs(full)
  for i, (g, _, _) in enumerate(samples):
    small = g["depth"][::2, ::2]
    np.save(half / f"im{i}.npy", small)
    np.save(full / f"im{i}.npy", depth_cli.upsample_bilinear(small, g["depth"].shape))
  assert _main("--gt", gt, "--depth", half, "--protocols", "v") == 2
  assert "pass --upsample bilinear" in capsys.readouterr().err
  args = ("--gt", gt, "--protocols", "v,i")
  assert (
    _main(*args, "--depth", half, "--upsample", "bilinear", "--output", tmp_path / "u.json") == 0
  )
  assert _main(*args, "--depth", full, "--output", tmp_path / "f.json") == 0
  u, f = json.load(open(tmp_path / "u.json")), json.load(open(tmp_path / "f.json"))
  assert u["upsample"] == "bilinear" and u["num_images"] == 3
  for k in ("coverage", "d_ord_cond", "d_ord_joint", "R", "F1"):
    assert u[k] == f[k], k
  assert u["d_ord_cond"] > 0.9  # a half-resolution GT depth still orders boundaries
  # GT-depth subset: im1 has no GT depth map.
  os.remove(gt / "depth" / "im1.png")
  capsys.readouterr()
  assert _main(*args, "--depth", full, "--gt-depth-only", "--output", tmp_path / "s.json") == 0
  s = json.load(open(tmp_path / "s.json"))
  assert s["ids"] == ["im0", "im2"] and s["gt_depth_only"] is True
  assert "GT-depth subset: 2 of 3 images" in capsys.readouterr().out
  for name in ("im0", "im2"):
    os.remove(gt / "depth" / f"{name}.png")
  assert _main(*args, "--depth", full, "--gt-depth-only") == 2
  assert "none of the 3 images has" in capsys.readouterr().err
