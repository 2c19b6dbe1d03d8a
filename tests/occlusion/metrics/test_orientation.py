"""The orientation rule on hand-built cases with known answers."""

import numpy as np
import pytest

from relations.occlusion.metrics import image_eval
from relations.occlusion.metrics import matching

D = np.deg2rad


@pytest.mark.parametrize(
  "gt,pred,ok",
  [
    (0.0, D(45), True),
    (0.0, D(135), False),
    (0.0, D(-45), True),
    (0.0, D(-135), False),  # the four quadrants
    (D(90), D(170), True),
    (D(90), D(-10), False),
    (D(-90), D(-170), True),
    (D(-90), D(10), False),
    (D(90), D(-90), False),
    (D(180), 0.0, False),
    (0.0, np.pi / 2, True),
    (0.0, -np.pi / 2, True),  # exactly 90: inclusive
    (np.pi / 2, np.pi, True),
    (-np.pi / 2, np.pi, True),
    (np.pi - 0.1, -np.pi + 0.1, True),
    (np.pi, -np.pi, True),  # wrap at pi
    (-np.pi + 0.05, np.pi - 0.05, True),
    (np.pi, 0.0, False),
    (0.0, D(90.001), False),
    (D(10), D(-80.5), False),
  ],
)
def test_rule(gt, pred, ok):
  assert bool(image_eval.orientation_correct(pred, gt)) == ok
  # The compiled matcher applies the same rule to its pairs.
  g = np.zeros((12, 12), bool)
  g[6, 6] = True
  theta_gt = np.full((12, 12), gt)
  res = matching.sweep_counts(
    np.array([[6, 7]]), np.array([0]), g, 2.0, 1, theta_pred=np.array([pred]), theta_gt=theta_gt
  )
  assert res["cnt_r"][0] == 1
  assert res["cnt_r_occ"][0] == int(ok)


def test_counts_on_flipped_segment_and_invalid_pixels():
  # Two horizontal GT segments; the prediction is shifted down by one pixel;
  # the right segment's predicted angle is flipped by pi; half of the left
  # segment has no valid orientation.
  h, w = 40, 60
  gt = np.zeros((h, w), bool)
  gt[20, 5:25] = True
  gt[20, 35:55] = True
  theta_gt = np.where(gt, 0.3, 0.0)
  valid = gt.copy()
  valid[20, 5:15] = False
  yx = np.argwhere(np.roll(gt, 1, axis=0))
  theta_pred = np.where(yx[:, 1] < 30, 0.3, 0.3 + np.pi)
  res = matching.sweep_counts(
    yx, np.zeros(len(yx), np.int64), gt, 1.5, 1, theta_pred, theta_gt, valid
  )
  assert res["cnt_r"][0] == 40
  assert res["cnt_r_occ"][0] == 20
  assert res["cnt_r_valid"][0] == 30 and res["sum_r_valid"] == 30
  assert res["cnt_r_occ_valid"][0] == 10
  f = res["flags"][0]
  assert ((f & 1) > 0).sum() == 40 and ((f & 2) > 0).sum() == 20
  assert ((f & 8) > 0).sum() == 10
  # Pixels matched only to invalid GT: the 10 of the left half.
  assert (((f & 1) > 0) & ((f & 4) == 0)).sum() == 10


def test_several_annotators_union_and_sum():
  h, w = 30, 30
  g1 = np.zeros((h, w), bool)
  g1[10, 5:15] = True
  g2 = np.zeros((h, w), bool)
  g2[11, 5:25] = True
  prob = np.zeros((h, w), np.float32)
  prob[10, 5:20] = 0.9  # NMS keeps a 1-px ridge
  c = image_eval.evaluate_image(
    prob, [g1, g2], np.zeros((h, w)), [np.zeros((h, w))] * 2, nthresh=5, max_dist=0.1
  )
  # Annotator 1 matches 10, annotator 2 matches 15 (pred has 15 pixels).
  assert c["sum_r"][2] == 30
  assert c["cnt_r"][2] == 25
  assert c["cnt_p"][2] == 15 and c["sum_p"][2] == 15
