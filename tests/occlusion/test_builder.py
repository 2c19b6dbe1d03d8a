"""TFDS builder tests: one DatasetBuilderTestCase and one known-pixel test per
format (realoob, PIOD, BSDS ownership), plus bad-input errors."""

import os
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

from relations.occlusion.data import occlusion_boundaries
from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data.occlusion_boundaries import make_dummy_data

DUMMY = make_dummy_data.HERE


class RealoobBuilderTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = occlusion_boundaries.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["realoob"]
  SPLITS = {"train": 4, "test": 2}  # 3 scenes + 1 hard negative
  EXAMPLE_DIR = DUMMY


class PiodBuilderTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = occlusion_boundaries.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["piod"]
  SPLITS = {"train": 3, "test": 2}
  EXAMPLE_DIR = DUMMY


class BsdsOwnershipBuilderTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = occlusion_boundaries.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["bsds_ownership"]
  SPLITS = {"train": 3, "test": 2}
  EXAMPLE_DIR = DUMMY


def _build(tmp_path, config, manual=DUMMY):
  builder = occlusion_boundaries.Builder(
    config=config, data_dir=str(tmp_path / "tfds"), file_format="array_record"
  )
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(manual)))
  return builder


@pytest.mark.parametrize("config", ["realoob", "piod", "bsds_ownership"])
def test_known_pixels(tmp_path, config):
  builder = _build(tmp_path, config)
  src = builder.as_data_source("test")
  by_id = {
    src[i]["id"].decode() if isinstance(src[i]["id"], bytes) else src[i]["id"]: src[i]
    for i in range(len(src))
  }
  checked = 0
  for (c, image_id, ann, y, x), (_, is_b, theta, is_v) in make_dummy_data.KNOWN.items():
    if c != config:
      continue
    ex = by_id[image_id]
    assert ex["image"].shape == make_dummy_data.SIZE + (3,)
    assert ex["boundaries"].shape[1:] == make_dummy_data.SIZE
    assert bool(ex["boundaries"][ann, y, x]) == is_b
    assert bool(ex["valid"][ann, y, x]) == is_v
    # realoob stores uint16 codes (step 2*pi/65535); the .mat formats floats.
    tol = 5e-5 if config == "realoob" else 1e-6
    assert abs(float(ex["orientation"][ann, y, x]) - theta) <= tol
    checked += 1
  assert checked == 2
  # Every orientation is in the internal range and zero off the boundary.
  for ex in by_id.values():
    o = ex["orientation"]
    assert np.all((o > -np.pi) & (o <= np.pi))
    assert np.all(o[~ex["boundaries"]] == 0)
    assert np.all(ex["boundaries"][ex["valid"]])
    # The sparse OB pixels (what training reads) rebuild the dense maps exactly.
    ob = ex["ob"]
    a, h, w = ex["boundaries"].shape
    assert (int(ob["annotators"]), int(ob["height"]), int(ob["width"])) == (a, h, w)
    dense = {
      k: np.zeros((a, h * w), dt)
      for k, dt in (("boundaries", bool), ("orientation", np.float32), ("valid", bool))
    }
    dense["boundaries"][ob["annotator"], ob["index"]] = True
    dense["orientation"][ob["annotator"], ob["index"]] = ob["orientation"]
    dense["valid"][ob["annotator"], ob["index"]] = ob["valid"]
    for k, v in dense.items():
      np.testing.assert_array_equal(v.reshape(a, h, w), ex[k], err_msg=k)


def test_realoob_depth_and_hard_negative(tmp_path):
  builder = _build(tmp_path, "realoob")
  train = builder.as_data_source("train")
  exs = [train[i] for i in range(len(train))]
  hard = [e for e in exs if e["hard_negative"]]
  assert len(hard) == 1 and not hard[0]["boundaries"].any()
  real = [e for e in exs if not e["hard_negative"]]
  # Synthetic depth lies in the generator's range (metres, mm-quantised).
  assert all(1.0 <= e["depth"].min() and e["depth"].max() <= 9.5 for e in real)


def test_bsds_keeps_every_annotator(tmp_path):
  builder = _build(tmp_path, "bsds_ownership")
  test = builder.as_data_source("test")
  ex = test[0]
  assert ex["boundaries"].shape[0] == 2
  # Annotator 2 dropped the left third (make_dummy_data), annotator 1 did not.
  third = make_dummy_data.SIZE[1] // 3
  assert ex["boundaries"][0][:, :third].any()
  assert not ex["boundaries"][1][:, :third].any()


def test_missing_file_is_named(tmp_path):
  manual = tmp_path / "manual"
  shutil.copytree(os.path.join(DUMMY, "piod"), manual / "piod")
  os.remove(manual / "piod" / "JPEGImages" / "2008_000005.jpg")
  with pytest.raises(
    occlusion_formats.OcclusionFormatError, match=r"2008_000005\.jpg: image is missing"
  ):
    _build(tmp_path, "piod", manual)


def test_malformed_mat_names_field(tmp_path):
  path = str(tmp_path / "bad.mat")
  occlusion_formats._savemat(path, {"bndinfo_pascal": {"imsize": [[2, 3]]}})  # pylint: disable=protected-access
  with pytest.raises(
    occlusion_formats.OcclusionFormatError,
    match=r"bad\.mat: bndinfo_pascal has no field 'OrientMap'",
  ):
    occlusion_formats.read_piod(path)
