"""Input-pipeline ops: every geometric op is checked against labels recomputed
from the equally transformed synthetic scene (depth, object and sheet maps)."""

import cv2
import numpy as np
import pytest

from relations.occlusion.data import preprocess as pp
from relations.occlusion.data import synthetic as so

H, W = 48, 56  # non-square so that a transposition bug shows


@pytest.fixture(scope="module")
def scene():
  rng = np.random.default_rng(so.scene_seed(3, "train", 5))
  sc = so.render_scene(rng, H, W)
  assert sc["boundaries"].sum() > 50 and sc["valid"].sum() > 30
  return sc


def _sample(depth, obj, u, image):
  b, o, v = so.labels_from_surfaces(depth, obj, u, border=0)
  return {
    "image": image.astype(np.float32) / 127.5 - 1,
    "boundary": b.astype(np.float32),
    "orientation": o,
    "valid": v.astype(np.float32),
    "mask": np.ones(b.shape, np.float32),
  }


def _assert_same_labels(got, want, region=None):
  region = np.ones(got["boundary"].shape, bool) if region is None else region
  np.testing.assert_array_equal(got["boundary"][region], want["boundary"][region])
  np.testing.assert_array_equal(got["valid"][region], want["valid"][region])
  b = (want["boundary"] > 0) & region
  d = np.angle(np.exp(1j * (got["orientation"][b].astype(np.float64) - want["orientation"][b])))
  assert np.abs(d).max() < 1e-5
  assert np.all((got["orientation"] > -np.pi) & (got["orientation"] <= np.pi))


def _maps(sc, fn):
  return fn(sc["depth"]), fn(sc["obj"]), fn(sc["u"]), fn(sc["image"])


@pytest.mark.parametrize(
  "name,op,fn",
  [
    ("flip_lr", pp.flip_lr, lambda a: a[:, ::-1]),
    ("flip_ud", pp.flip_ud, lambda a: a[::-1]),
    ("rot90_1", lambda s: pp.rot90(s, 1), lambda a: np.rot90(a, 1)),
    ("rot90_2", lambda s: pp.rot90(s, 2), lambda a: np.rot90(a, 2)),
    ("rot90_3", lambda s: pp.rot90(s, 3), lambda a: np.rot90(a, 3)),
    ("rot90_-1", lambda s: pp.rot90(s, -1), lambda a: np.rot90(a, -1)),
  ],
)
def test_geometric_op_matches_recomputed_labels(scene, name, op, fn):
  del name
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  got = op(orig)
  want = _sample(*_maps(scene, lambda a: np.ascontiguousarray(fn(a))))
  np.testing.assert_array_equal(got["image"], want["image"])
  _assert_same_labels(got, want)


def test_known_flip_and_rotation_angles():
  # A single OB pixel with theta = 0.3: the documented rules, exactly.
  s = {
    "image": np.zeros((4, 5, 3), np.float32),
    "boundary": np.zeros((4, 5), np.float32),
    "orientation": np.zeros((4, 5), np.float32),
    "valid": np.zeros((4, 5), np.float32),
    "mask": np.ones((4, 5), np.float32),
  }
  s["boundary"][1, 3] = s["valid"][1, 3] = 1
  s["orientation"][1, 3] = 0.3
  assert pp.flip_lr(s)["orientation"][1, 1] == pytest.approx(-0.3)
  assert pp.flip_ud(s)["orientation"][2, 3] == pytest.approx(np.pi - 0.3)
  # np.rot90 k=1 moves (y=1, x=3) of a 4x5 image to (y=5-1-3, x=1).
  assert pp.rot90(s, 1)["orientation"][1, 1] == pytest.approx(0.3 - np.pi / 2)
  assert pp.rot90(s, 2)["orientation"][2, 1] == pytest.approx(0.3 - np.pi)
  assert pp.rot90(s, 3)["orientation"][3, 2] == pytest.approx(0.3 - 1.5 * np.pi + 2 * np.pi)


def test_crop_matches_recomputed_labels_inside(scene):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  y0, x0, h, w = 7, 11, 30, 33
  got = pp.crop(orig, y0, x0, h, w)
  want = _sample(*_maps(scene, lambda a: np.ascontiguousarray(a[y0 : y0 + h, x0 : x0 + w])))
  # The normal uses a radius-3 disk and OB pairs straddle the crop edge, so
  # only pixels at least 4 px inside the crop must agree.
  inner = np.zeros((h, w), bool)
  inner[4:-4, 4:-4] = True
  _assert_same_labels(got, want, inner)
  assert got["mask"].all()


def test_crop_outside_pads_with_mask_zero(scene):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  got = pp.crop(orig, -3, W - 10, 20, 16)
  assert got["mask"][:3].sum() == 0 and got["mask"][:, 10:].sum() == 0
  assert got["mask"][3:, :10].all()
  np.testing.assert_array_equal(got["boundary"][3:, :10], orig["boundary"][:17, W - 10 :])


@pytest.mark.parametrize("factor", [0.75, 1.5])
def test_scale_matches_labels_of_resampled_scene(scene, factor):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  got = pp.scale(orig, factor)
  h, w = got["boundary"].shape
  assert (h, w) == (round(H * factor), round(W * factor))
  # Reference: the scene maps resampled (nearest) to the new grid; sheet
  # coordinates are rescaled with it, so folds stay continuous.
  nn = lambda a: cv2.resize(a, (w, h), interpolation=cv2.INTER_NEAREST)
  u = np.stack([nn(scene["u"][..., c]) * factor for c in range(2)], -1)
  want = _sample(nn(scene["depth"]), nn(scene["obj"]), u, nn(scene["image"]))
  gb, wb = got["boundary"] > 0, want["boundary"] > 0
  # Boundaries agree up to one pixel both ways (chamfer test) ...
  dist_to_want = cv2.distanceTransform((~wb).astype(np.uint8), cv2.DIST_L2, 3)
  dist_to_got = cv2.distanceTransform((~gb).astype(np.uint8), cv2.DIST_L2, 3)
  assert np.mean(dist_to_want[gb] <= 1.5) > 0.97
  assert np.mean(dist_to_got[wb] <= 1.5) > 0.97
  # ... and where both mark the same valid pixel the angles agree.
  both = gb & wb & (got["valid"] > 0) & (want["valid"] > 0)
  d = np.abs(
    np.angle(np.exp(1j * (got["orientation"][both].astype(float) - want["orientation"][both])))
  )
  assert both.sum() > 20 and np.median(d) < 0.2 and np.mean(d < 0.6) > 0.9


def test_upscale_keeps_boundaries_connected():
  s = {
    "image": np.zeros((10, 10, 3), np.float32),
    "boundary": np.zeros((10, 10), np.float32),
    "orientation": np.zeros((10, 10), np.float32),
    "valid": np.zeros((10, 10), np.float32),
    "mask": np.ones((10, 10), np.float32),
  }
  for i in range(2, 8):  # a diagonal line
    s["boundary"][i, i] = s["valid"][i, i] = 1
    s["orientation"][i, i] = 0.7
  up = pp.scale(s, 2.0)
  n, _ = cv2.connectedComponents(up["boundary"].astype(np.uint8), connectivity=8)
  assert n == 2  # background + one component
  assert np.all(up["orientation"][up["boundary"] > 0] == np.float32(0.7))


def test_photometric_keeps_labels_and_range(scene):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  a = pp.photometric(orig, np.random.default_rng(1))
  b = pp.photometric(orig, np.random.default_rng(1))
  np.testing.assert_array_equal(a["image"], b["image"])
  assert not np.allclose(a["image"], orig["image"])
  assert a["image"].min() >= -1 and a["image"].max() <= 1
  for k in pp.LABEL_KEYS:
    np.testing.assert_array_equal(a[k], orig[k])


def test_train_sample_fixed_shape_and_deterministic(scene):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  kw = dict(crop_size=(32, 32), scale_range=(0.8, 1.2))
  a = pp.train_sample(orig, np.random.default_rng(5), **kw)
  b = pp.train_sample(orig, np.random.default_rng(5), **kw)
  for k in a:
    assert a[k].shape[:2] == (32, 32)
    np.testing.assert_array_equal(a[k], b[k])


def _whole_image_recipe(s, rng, crop_size, scale_range, strength=1.0):
  """The recipe `augment` computes crop first: transform everything, then crop."""
  lo, hi = scale_range
  if hi > lo or lo != 1.0:
    s = pp.scale(s, rng.uniform(lo, hi))
  s = pp.rot90(s, int(rng.integers(4)))
  if rng.uniform() < 0.5:
    s = pp.flip_lr(s)
  s = pp.random_crop(s, rng, *crop_size)
  return pp.photometric(s, rng, strength) if strength else s


@pytest.mark.parametrize("crop", [(32, 24), (24, 40), (60, 20), (64, 70)])
def test_crop_first_equals_whole_image_recipe_at_scale_one(scene, crop):
  # (64, 70) is larger than the image: the padding lands where the whole-image
  # recipe puts it, for every rotation and flip.
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  for seed in range(24):
    got = pp.train_sample(orig, np.random.default_rng(seed), crop)
    want = _whole_image_recipe(orig, np.random.default_rng(seed), crop, (1, 1))
    for k in want:
      np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} seed {seed}")


@pytest.mark.parametrize("factor", [0.75, 1.25])
def test_crop_first_with_scaling_matches_whole_image_labels(scene, factor):
  """Rescaling only the window gives the whole-image result up to a sub-pixel
  grid offset: same geometry draw and padding, every OB pixel within one pixel
  of an OB pixel of the whole-image result (away from the crop's edge), same
  angle there, and an image that differs by that offset only."""
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  near = lambda m: cv2.dilate(m.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
  inner = np.zeros((24, 24), bool)
  inner[1:-1, 1:-1] = True
  total = 0
  for seed in range(12):
    kw = dict(crop_size=(24, 24), scale_range=(factor, factor), photometric_strength=0.0)
    got = pp.train_sample(orig, np.random.default_rng(seed), **kw)
    want = _whole_image_recipe(orig, np.random.default_rng(seed), (24, 24), (factor, factor), 0.0)
    np.testing.assert_array_equal(got["mask"], want["mask"])
    g, w = got["boundary"] > 0, want["boundary"] > 0
    assert not (g & inner & ~near(w)).any(), seed
    assert not (w & inner & ~near(g)).any(), seed
    g, w = g & inner, w & inner
    total += int(g.sum())
    both = g & w
    d = np.angle(
      np.exp(1j * (got["orientation"][both].astype(np.float64) - want["orientation"][both]))
    )
    # A shared pixel may take its angle from the neighbouring source pixel
    # (corners turn by up to ~0.35 rad); a wrong flip / rotation would be >= pi/2.
    assert not both.any() or (np.median(np.abs(d)) < 1e-3 and np.abs(d).max() < 0.5)
    # Half a pixel of this high-frequency texture: ~0.1 of the [-1, 1] range.
    assert np.abs(got["image"] - want["image"]).mean() < 0.2
  assert total > 100


def test_train_example_reads_only_the_window(scene):
  """`train_example` on a builder example equals `train_sample` of its decode."""
  h, w = scene["boundaries"].shape
  rng = np.random.default_rng(0)
  example = {
    "id": "x",
    "image": scene["image"].astype(np.uint8),
    "boundaries": np.stack([scene["boundaries"], ~scene["boundaries"]]),
    "orientation": np.stack([scene["orientation"]] * 2).astype(np.float32),
    # valid is a subset of the boundaries (builder contract).
    "valid": np.stack([scene["valid"], ~scene["boundaries"] & (np.arange(w) % 3 == 0)]),
    "depth": None,
  }  # never read
  from relations.occlusion.data.occlusion_boundaries import (
    occlusion_boundaries_dataset_builder as ob,
  )  # pylint: disable=g-import-not-at-top

  sparse = {
    "id": "x",
    "image": example["image"],
    "ob": ob.sparse_labels(example["boundaries"], example["orientation"], example["valid"]),
  }
  assert sparse["ob"]["annotators"] == 2 and sparse["ob"]["width"] == w
  for ann in (0, 1):
    for seed in range(6):
      kw = dict(crop_size=(20, 30), scale_range=(0.8, 1.2))
      want = pp.train_sample(pp.decode(example, ann), np.random.default_rng(seed), **kw)
      for ex in (example, sparse):
        got = pp.train_example(ex, ann, np.random.default_rng(seed), **kw)
        for k in want:
          np.testing.assert_array_equal(got[k], want[k])
    for k, v in pp.decode(example, ann).items():  # the offline 16x path decodes whole
      np.testing.assert_array_equal(pp.decode(sparse, ann)[k], v)
  del rng, h


def test_sixteen_variants_are_distinct_and_first_is_identity(scene):
  orig = _sample(scene["depth"], scene["obj"], scene["u"], scene["image"])
  variants = [pp.geometric_variant(orig, i) for i in range(16)]
  for k in orig:
    np.testing.assert_array_equal(variants[0][k], orig[k])
  keys = {
    variants[i]["boundary"].tobytes() + bytes(variants[i]["boundary"].shape) for i in range(16)
  }
  assert len(keys) == 16
  with pytest.raises(ValueError, match="variant 16 out of range"):
    pp.geometric_variant(orig, 16)


def test_pad_and_crop_back_round_trip():
  img = np.arange(5 * 7 * 3, dtype=np.float32).reshape(5, 7, 3)
  padded, hw = pp.pad_to_multiple(img, 4)
  assert padded.shape == (8, 8, 3) and hw == (5, 7)
  np.testing.assert_array_equal(padded[5:, :7], np.repeat(img[4:5], 3, 0))
  np.testing.assert_array_equal(pp.crop_back(padded, hw), img)


def test_paper_pool_and_config_default():
  """RealOOB: 390 x 16 + 248 hard negatives = 6,488 samples, 3.8 % hard negatives."""
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  pool, share, text = pp.pool_summary(390, 248)
  assert pool == 6488 and round(100 * share, 1) == 3.8
  assert "= 6,488 samples (3.8 % hard negatives)" in text
  src = pp.ExpandedSource(list(range(5)), 16, hard_negative=[0, 1, 0, 0, 1])
  assert len(src) == 3 * 16 + 2 and src.summary()[0] == 50
  assert list(src._base_index[:18]) == [0] * 16 + [1, 2]  # pylint: disable=protected-access
  assert list(src._variant[15:19]) == [15, 0, 0, 1]  # pylint: disable=protected-access
  paper = config_util.load_config("configs/occlusion.py:B/16", [])
  assert paper.data.offline_16x is True
  assert config_util.load_config("configs/occlusion.py:tiny", []).data.offline_16x is False
  assert config_util.load_config("configs/occlusion.py:tiny,offline_16x", []).data.offline_16x
  off = config_util.load_config("configs/occlusion.py:B/16,offline_16x=false", [])
  assert off.data.offline_16x is False
