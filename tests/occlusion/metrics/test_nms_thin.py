"""edge_nms, crispness and thinning against pyEdgeEval's ports."""

import numpy as np
from pyEdgeEval._lib import nms as ref_nms
from pyEdgeEval.preprocess import binary_thin
from pyEdgeEval.preprocess.nms.toolbox import conv_tri
from pyEdgeEval.preprocess.nms.toolbox import grad2

from relations.occlusion.metrics import nms
from relations.occlusion.metrics import thin
from tests.occlusion.metrics import fixtures


def _ref_orientation(e):
  s = conv_tri(e, 4)
  ox, oy = grad2(s)
  oxx, _ = grad2(ox)
  oxy, oyy = grad2(oy)
  return np.mod(np.arctan(oyy * np.sign(-oxy) / (oxx + 1e-5)), np.pi)


def test_float64_kernel_is_bit_exact_with_pyedgeeval():
  for s in fixtures.pairs()[:10]:
    e = s["prob"].astype(np.float64)
    o = _ref_orientation(e)
    for r in (1, 2):
      want = ref_nms(e, o, r, 5, 1.01)
      got = nms.edges_nms(e, o, r, 5, 1.01, dtype=np.float64)
      np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(nms.nms_orientation(e, np.float64), o, atol=1e-10)


def test_float32_edge_nms_matches_double_up_to_single_rounding():
  for s in fixtures.pairs()[:10]:
    e64 = s["prob"].astype(np.float64)
    want = ref_nms(e64, _ref_orientation(e64), 1, 5, 1.01)
    got = nms.edge_nms(s["prob"])
    assert got.dtype == np.float32
    # Same kept set; values equal to single precision.
    assert ((got > 0) != (want > 0)).sum() <= 2
    np.testing.assert_allclose(got, want, atol=2e-7)


def test_border_ramp_and_known_ridge():
  e = np.zeros((20, 20), np.float32)
  e[:, 10] = 1.0  # a vertical ridge survives NMS
  e[:, 9] = 0.5
  out = nms.edge_nms(e)
  assert np.all(out[:, 9] == 0)
  np.testing.assert_allclose(out[5:15, 10], 1.0)
  np.testing.assert_allclose(out[[0, 1, 2, 3, 4], 10], [0, 0.2, 0.4, 0.6, 0.8], atol=1e-6)


def test_crispness_definition():
  s = fixtures.pairs()[3]
  e = s["prob"].astype(np.float64)
  want = ref_nms(e, _ref_orientation(e), 2, 5, 1.01).sum() / e.sum()
  assert abs(nms.crispness(s["prob"]) - want) < 1e-3
  assert abs(nms.crispness(s["prob"], dtype=np.float64) - want) < 1e-12
  assert np.isnan(nms.crispness(np.zeros((8, 8))))


def test_thin_is_bit_exact_with_binary_thin():
  import cv2  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  for _ in range(40):
    h, w = rng.integers(5, 100, 2)
    m = cv2.GaussianBlur(rng.random((h, w)).astype(np.float32), (0, 0), rng.uniform(0.5, 3))
    b = m > np.quantile(m, rng.uniform(0.3, 0.9))
    np.testing.assert_array_equal(thin.thin(b), binary_thin(b))
