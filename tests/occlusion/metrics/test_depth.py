"""Depth-probe building blocks with known answers."""

import numpy as np

from relations.occlusion.metrics import depth_orientation
from relations.occlusion.metrics import depth_probes


def _step_scene():
  # Left half near (1 m), right half far (2 m); the OB is the near column
  # x = 29 (occluder side).  Occluded side is +x, so the left-hand rule
  # gives theta = atan2(0, 1) - pi/2 = -pi/2 (walking up, occluder left).
  h, w = 40, 60
  depth = np.where(np.arange(w)[None, :] < 30, 1.0, 2.0) * np.ones((h, 1))
  b = np.zeros((h, w), bool)
  b[5:35, 29] = True
  theta = np.where(b, -np.pi / 2, 0.0)
  return depth, b, theta


def test_orientation_from_depth_on_a_step():
  depth, b, theta = _step_scene()
  th, commit = depth_orientation.orientation_from_depth(b, depth)
  assert commit.sum() == b.sum()
  np.testing.assert_allclose(th[b], -np.pi / 2, atol=1e-6)
  # Swapped depths flip the orientation; a 3 % step is not committed.
  th2, c2 = depth_orientation.orientation_from_depth(b, 3.0 - depth)
  np.testing.assert_allclose(th2[b], np.pi / 2, atol=1e-6)
  _, c3 = depth_orientation.orientation_from_depth(b, np.where(depth > 1, 1.03, 1.0))
  assert c3.sum() == 0
  # Missing depth on one side: no commitment.
  d4 = depth.copy()
  d4[:, 30:] = 0
  assert depth_orientation.orientation_from_depth(b, d4)[1].sum() == 0


def test_ordering_counts():
  depth, b, theta = _step_scene()
  assert depth_probes.ordering_counts(depth, b, theta) == (30, 30, 30)
  assert depth_probes.ordering_counts(3.0 - depth, b, theta) == (30, 30, 0)


def test_chamfer_known_shift():
  v = np.zeros((30, 30), bool)
  v[5:25, 10] = True
  e = np.zeros((30, 30), bool)
  e[5:25, 13] = True
  m = depth_probes.chamfer(e, v)
  assert m["dbe_acc"] == 3.0 and m["dbe_com"] == 3.0
  m = depth_probes.chamfer(np.zeros_like(e), v)
  assert m == dict(dbe_acc=10.0, dbe_com=10.0)


def test_strict_pixel_and_si_bf1_on_the_step():
  depth, b, theta = _step_scene()
  m = depth_probes.strict_pixel(b, b, b)
  assert m == dict(R=1.0, P=1.0, F1=1.0)
  s = depth_probes.si_bf1(depth, b, b, theta)
  # Predicted relations: the whole near column x=29 (rows 0..39) occludes
  # its right neighbour; the GT holds rows 5..34 -> R = 1/4 (one of four
  # directions), P = (30/40)/4.
  r = 0.25
  p = 0.25 * 30 / 40
  np.testing.assert_allclose(s["R_w"], r)
  np.testing.assert_allclose(s["F1_w"], 2 * p * r / (p + r))
  e = depth_probes.ratio_edge_map(depth)
  np.testing.assert_allclose(e[:, 29], 0.5)
  assert e[:, 30].max() == 0


def test_evaluate_depth_all_protocols_runs_on_real_shapes():
  depth, b, theta = _step_scene()
  out = depth_probes.evaluate_depth(
    [dict(depth=depth, boundaries=b, valid=b, orientation=theta)], num_workers=1
  )
  assert out["coverage"] == 1.0 and out["d_ord_joint"] == 1.0
  assert out["B-ODS"] > 0.9 and out["O-ODS"] > 0.9
  assert out["dbe_com"] <= 1.0
