"""Round trips and errors of the RealOOB layout codec."""

import os

import cv2
import numpy as np
import pytest

from relations.occlusion.data import realoob_io as io


def test_orientation_codec_known_values_and_round_trip():
  v = io.encode_orientation(np.array([-np.pi, 0.0, np.pi / 2, np.pi - 1e-9]))
  assert v.dtype == np.uint16
  assert v.tolist() == [0, 32768, 49151, 65535]
  th = np.random.default_rng(0).uniform(-np.pi, np.pi, 1000)
  back = io.decode_orientation(io.encode_orientation(th)).astype(np.float64)
  err = np.abs(np.angle(np.exp(1j * (back - th))))
  assert err.max() <= io.ORIENTATION_STEP / 2 + 1e-6
  # Angles outside [-pi, pi) wrap.
  assert (
    io.encode_orientation(np.array([3 * np.pi]))[0] == 65535
    or io.encode_orientation(np.array([3 * np.pi]))[0] == 0
  )


def test_probability_codec():
  v = io.encode_probability(np.array([-0.5, 0.0, 0.5, 1.0, 2.0]))
  assert v.tolist() == [0, 0, 32768, 65535, 65535]
  np.testing.assert_allclose(io.decode_probability(v)[2], 32768 / 65535)


def test_gt_and_prediction_round_trip(tmp_path):
  rng = np.random.default_rng(1)
  b = rng.random((20, 30)) < 0.2
  th = rng.uniform(-np.pi, np.pi, (20, 30))
  v = b & (rng.random((20, 30)) < 0.5)
  d = rng.uniform(0.5, 20, (20, 30))
  d[0, 0] = 0
  io.write_gt(str(tmp_path), "x1", b, th, v, d)
  g = io.read_gt(str(tmp_path), "x1", with_depth=True)
  np.testing.assert_array_equal(g["boundaries"], b)
  np.testing.assert_array_equal(g["valid"], v)
  assert g["depth"][0, 0] == 0
  np.testing.assert_allclose(g["depth"], np.rint(d * 1000) / 1000, atol=1e-6)
  p = rng.random((20, 30))
  io.write_prediction(str(tmp_path / "pred"), "x1", p, th)
  q = io.read_prediction(str(tmp_path / "pred"), "x1")
  assert np.abs(q["boundaries"] - p).max() <= 0.5 / 65535 + 1e-7
  assert io.list_ids(str(tmp_path)) == ["x1"]
  assert not [f for f in os.listdir(tmp_path / "boundaries") if f.startswith(".tmp_")]
  io.write_split(str(tmp_path), "test", ["x1", "x2"])
  assert io.read_split(str(tmp_path), "test") == ["x1", "x2"]


def test_errors_name_file_and_field(tmp_path):
  os.makedirs(tmp_path / "boundaries")
  p = str(tmp_path / "boundaries" / "a.png")
  cv2.imwrite(p, np.full((4, 4), 7, np.uint8))
  with pytest.raises(
    io.RealOOBFormatError,
    match=r"a\.png: boundaries must "
    r"hold only 0 and 255, found 7 at \(y=0, x=0\)",
  ):
    io.read_boundaries(p)
  with pytest.raises(io.RealOOBFormatError, match="orientation must be uint16"):
    io.read_orientation(p)
  with pytest.raises(io.RealOOBFormatError, match="b.png: valid file is missing"):
    io.read_valid(str(tmp_path / "valid" / "b.png"))
  with open(tmp_path / "boundaries" / "c.png", "wb") as f:
    f.write(b"not a png")
  with pytest.raises(io.RealOOBFormatError, match="c.png: boundaries is not a readable PNG"):
    io.read_boundaries(str(tmp_path / "boundaries" / "c.png"))
