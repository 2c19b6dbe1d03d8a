"""Synthetic scene generator: label rules on hand-built scenes, determinism,
and the on-disk layout."""

import filecmp
import os

import numpy as np

from relations.occlusion.data import realoob_io
from relations.occlusion.data import synthetic as so


def _square_scene(h=20, w=24, near=2.0, far=8.0):
  """A square (rows 6..13, cols 8..15) at depth `near` over a plane."""
  yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
  depth = np.full((h, w), far)
  obj = np.zeros((h, w), np.int32)
  depth[6:14, 8:16], obj[6:14, 8:16] = near, 1
  return depth, obj, np.stack([xx, yy], -1)


def test_square_labels_follow_left_hand_rule():
  b, o, v = so.labels_from_surfaces(*_square_scene())
  # OB on the occluder side only: the square's outer ring.
  ring = np.zeros_like(b)
  ring[6:14, 8:16] = True
  ring[7:13, 9:15] = False
  np.testing.assert_array_equal(b, ring)
  np.testing.assert_array_equal(v, ring)
  # Occluder on the left when walking along theta (x right, y down):
  # top edge walks -x (pi), bottom +x (0), left edge +y (pi/2), right -y.
  assert o[6, 11] == np.float32(np.pi)
  assert abs(o[13, 11]) < 1e-6
  assert abs(o[10, 8] - np.pi / 2) < 1e-6
  assert abs(o[10, 15] + np.pi / 2) < 1e-6
  # A corner points diagonally: top-left corner between pi and pi/2.
  assert abs(o[6, 8] - 3 * np.pi / 4) < 1e-6


def test_small_depth_step_is_ob_but_invalid_and_border_excluded():
  depth, obj, u = _square_scene(near=7.98)  # 2 cm step: touching objects
  b, _, v = so.labels_from_surfaces(depth, obj, u)
  assert b.sum() == 28 and v.sum() == 0
  depth, obj, u = _square_scene()
  depth[:, :10], obj[:, :10] = 1.0, 2  # a wall touching the left border
  b, _, _ = so.labels_from_surfaces(depth, obj, u, border=2)
  assert not b[:2].any() and not b[-2:].any() and not b[:, :2].any()
  assert b[2:-2, 9].all()  # its edge runs from border to border


def test_sheet_coordinate_continuity_makes_crease_no_ob():
  # One object whose right half is a flap folded back over the left: the
  # crease (sheet points adjacent) is no OB, the flap's far edge is.
  h, w = 16, 20
  yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
  depth = np.full((h, w), 5.0)
  obj = np.ones((h, w), np.int32)
  u = np.stack([xx, yy], -1)
  flap = (xx >= 4) & (xx < 10)  # columns 4..9 show sheet points 15..10
  u[..., 0] = np.where(flap, 19 - xx, xx)
  depth = np.where(flap, 5.0 - 0.1 * (10 - xx), depth)
  b, o, v = so.labels_from_surfaces(depth, obj, u, border=0)
  assert not b[:, 9:11].any()  # crease: continuous sheet, no OB
  expected = np.zeros_like(b)
  expected[:, 4] = True  # the flap's free edge over the sheet (x=3 shows u=3)
  np.testing.assert_array_equal(b, expected)
  assert v[:, 4].all() and np.allclose(o[2:-2, 4], np.pi / 2)


def test_generator_is_deterministic_and_readable(tmp_path):
  for d in ("a", "b"):
    so.main(
      [
        "--out",
        str(tmp_path / d),
        "--num_train",
        "2",
        "--num_test",
        "1",
        "--num_hard_negatives",
        "1",
        "--seed",
        "4",
        "--size",
        "40x48",
      ]
    )
  cmp = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
  assert not cmp.diff_files and not cmp.left_only
  for sub in cmp.subdirs.values():
    assert not sub.diff_files and not sub.left_only and sub.same_files
  root = str(tmp_path / "a")
  assert realoob_io.read_split(root, "test") == ["test_00000"]
  gt = realoob_io.read_gt(root, "train_00001", with_depth=True)
  assert gt["boundaries"].shape == (40, 48)
  assert gt["boundaries"].sum() > 20
  assert not gt["boundaries"][:2].any() and not gt["boundaries"][:, -2:].any()
  assert ((gt["depth"] >= 1.0) & (gt["depth"] <= 9.5)).all()
  assert os.path.isfile(os.path.join(root, "hard_negatives", "hardneg_00000.png"))


def test_scenes_have_distractors_and_hard_negatives_have_no_ob():
  # Over a handful of scenes, strong image edges (Canny-like gradient) away
  # from OBs exist: the data contains edges a model must learn to reject.
  import cv2  # pylint: disable=g-import-not-at-top

  off_ob, on_ob = 0, 0
  for i in range(8):
    sc = so.render_scene(np.random.default_rng(so.scene_seed(0, "train", i)), 64, 64)
    edges = cv2.Canny(cv2.cvtColor(sc["image"], cv2.COLOR_RGB2GRAY), 50, 100) > 0
    near_ob = cv2.dilate(sc["boundaries"].astype(np.uint8), np.ones((5, 5))) > 0
    off_ob += (edges & ~near_ob).sum()
    on_ob += (edges & near_ob).sum()
  assert off_ob > 0.5 * on_ob
  hn = so.render_scene(np.random.default_rng(1), 64, 64, hard_negative=True)
  assert not hn["boundaries"].any() and (hn["obj"] == 0).all()
