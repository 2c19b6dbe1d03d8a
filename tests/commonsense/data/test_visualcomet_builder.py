"""`visualcomet` TFDS builder on dummy_data (official layout, synthetic)."""

import json
import os
import pickle
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

from relations.commonsense.data.visualcomet import records
from relations.commonsense.data.visualcomet import visualcomet_dataset_builder as vcb
from relations.commonsense.text import person_tags
from relations.commonsense.text import safe_pickle

DUMMY = os.path.join(os.path.dirname(vcb.__file__), "dummy_data")


class TrainingTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vcb.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["training_features"]
  # train: 4 events x (2 + 4 + 4); val: 3 x 10 + one event without intents.
  SPLITS = {"train": 40, "val": 38}


class GenerationTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vcb.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["generation"]
  SPLITS = {"train": 12, "val": 12, "test": 6}  # 3 relations per event


class RankingTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vcb.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["ranking"]
  SPLITS = {"val": 38}


class ImageTableTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vcb.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["images", "images_features"]
  SPLITS = {"train": 2, "val": 2, "test": 1}  # each image once


def _build(config, data_dir, manual_dir=DUMMY):
  b = vcb.Builder(config=config, data_dir=str(data_dir))
  b.download_and_prepare(
    download_config=tfds.download.DownloadConfig(manual_dir=manual_dir), file_format="array_record"
  )
  return b


def _source(config, data_dir, split, manual_dir=DUMMY):
  """The expansion split joined with its image table, as the task reads it."""
  return vcb.DataSource(
    _build(config, data_dir, manual_dir),
    _build(vcb.table_config(config), data_dir, manual_dir),
    split,
  )


@pytest.fixture(scope="module")
def training_val(tmp_path_factory):
  return _source("training_features", tmp_path_factory.mktemp("tfds"), "val")


def _s(x):
  return x.decode() if isinstance(x, bytes) else x


def test_training_examples_in_official_order(training_val):
  src = training_val
  assert [int(src[i]["expansion_index"]) for i in range(len(src))] == list(range(38))
  rels = [_s(src[i]["relation"]) for i in range(10)]
  assert rels == ["intent"] * 2 + ["before"] * 4 + ["after"] * 4
  ex = src[2]  # event 0, before[0]
  assert int(ex["event_idx"]) == 0
  assert _s(ex["inference_text"]) == "take 3's coat."
  assert _s(ex["inference_text_name"]) == "take <|det3|>  's coat."
  assert _s(ex["event_name"]) == "<|det1|> is next to <|det3|>"
  # names = person, clock, person: tags 1 and 3 are the two people.
  assert [_s(n) for n in ex["names"]] == ["person", "clock", "person"]
  np.testing.assert_array_equal(ex["dets"], [0, 2])
  assert ex["boxes"].shape == (3, 4) and ex["visual_features"].shape == (3, 2048)
  assert "image" not in ex  # the features configs hold no JPEG


def test_images_and_features_stored_once_per_image(tmp_path):
  table = _build("images", tmp_path).as_data_source("val")
  assert [_s(table[r]["img_fn"]) for r in range(len(table))] == [
    "synth_movie_1000/synth_val_00000@0.jpg",
    "synth_movie_1000/synth_val_00001@0.jpg",
  ]
  src = _source("training", tmp_path, "val")
  assert len(src) == 38
  rows = [int(src[i]["image_index"]) for i in range(len(src))]
  assert sorted(set(rows)) == [0, 1]
  for i in (0, 37):
    ex = src[i]
    from PIL import Image  # pylint: disable=g-import-not-at-top

    want = np.asarray(Image.open(os.path.join(DUMMY, "vcr1images", _s(ex["img_fn"]))))
    np.testing.assert_array_equal(ex["image"], want)
    assert ex["image"].shape == (int(ex["height"]), int(ex["width"]), 3)
  feats = _build("images_features", tmp_path).as_data_source("val")
  assert feats[0]["object_features"].shape == (3, 2048) and "image" not in feats[0]


def test_image_table_keeps_a_training_size_copy(tmp_path):
  import cv2  # pylint: disable=g-import-not-at-top

  src = vcb.DataSource(
    _build("training", tmp_path), _build("images", tmp_path), "val", image="jpeg"
  )
  ex = src[0]
  full, small = vcb.decode_jpeg(ex["image"]), vcb.decode_jpeg(ex["image_small"])
  assert min(full.shape[:2]) < vcb.SMALL_SIDE  # the dummy images are small: kept at their size
  assert small.shape == full.shape
  assert np.abs(small.astype(int) - full).mean() < 6  # JPEG q90 of the same (noisy) pixels
  # A large image: short side SMALL_SIDE, area-downsampled.
  rng = np.random.default_rng(0)
  big = cv2.GaussianBlur(rng.integers(0, 256, (480, 640, 3), np.uint8), (0, 0), 3)
  got = vcb.decode_jpeg(vcb.small_jpeg(cv2.imencode(".png", big)[1].tobytes()))
  assert got.shape == (256, 341, 3)
  want = cv2.cvtColor(cv2.resize(big, (341, 256), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)
  assert np.abs(got.astype(int) - want).mean() < 4  # JPEG q90 (chroma subsampled)


def test_tag_beyond_detections_and_features(training_val):
  ex = training_val[16]  # event 1, after[0] = "wave to 57 people."
  assert _s(ex["inference_text_name"]) == "wave to <|det57|> people."
  assert [_s(k) for k in ex["person_keys"]] == ["3", "1", "57"]
  np.testing.assert_array_equal(ex["dets"], [0, 2])  # 57 has no detection
  feats = safe_pickle.load(os.path.join(DUMMY, "features", "synth_val_00000@0.pkl"))
  want = np.concatenate([feats["image_features"][None], feats["object_features"][[0, 2]]])
  np.testing.assert_array_equal(ex["visual_features"], want)
  assert person_tags.name2person_from_keys(["3", "1", "57"]) == {
    "<|det3|>": "3",
    "<|det1|>": "1",
    "<|det57|>": "57",
  }


def test_generation_references(tmp_path):
  src = _source("generation", tmp_path, "val")
  assert len(src) == 12
  ex = src[6]  # event 2, intent: empty list in the JSON
  assert _s(ex["relation"]) == "intent" and int(ex["event_idx"]) == 2
  assert list(ex["references"]) == []
  ex = src[5]  # event 1, after: the references' tags join the map
  assert [_s(k) for k in ex["person_keys"]] == ["3", "1", "57"]
  assert _s(ex["references_name"][0]) == "wave to <|det57|> people."
  assert _s(ex["rank_key"]) == ("synth_movie_1000/synth_val_00000@0.jpg_3 is waiting for 1_after")
  test = _source("generation", tmp_path, "test")
  assert all(len(test[i]["references"]) == 0 for i in range(len(test)))


# ----------------------------------------------------------- bad input
def _copy(tmp_path):
  d = tmp_path / "manual"
  shutil.copytree(DUMMY, d)
  return d


def _edit_json(path, fn):
  with open(path) as f:
    obj = json.load(f)
  fn(obj)
  with open(path, "w") as f:
    json.dump(obj, f)


def test_bad_record_names_file_record_field(tmp_path):
  d = _copy(tmp_path)
  _edit_json(d / "val_annots.json", lambda r: r[2].update(event=5))
  with pytest.raises(
    records.DataError,
    match=r"val_annots\.json: record 2: field 'event': "
    "expected a string, got int",
  ):
    _build("training", tmp_path / "out", str(d))


@pytest.mark.parametrize(
  "edit,pattern",
  [
    (
      lambda r: r[1].update(before="wash"),
      r"record 1: field 'before': expected a list of strings, got str",
    ),
    (
      lambda r: r[3]["after"].__setitem__(2, None),
      r"record 3: field 'after\[2\]': expected a string, got NoneType",
    ),
    (lambda r: r[0].pop("img_fn"), r"record 0: field 'img_fn': missing"),
    (lambda r: r[0].update(event="x \u00b2 y"), r"record 0: field 'event': cannot map person tags"),
  ],
)
def test_record_validation(tmp_path, edit, pattern):
  d = _copy(tmp_path)
  _edit_json(d / "train_annots.json", edit)
  with pytest.raises(records.DataError, match=pattern):
    records.load_annotations(str(d / "train_annots.json"))


@pytest.mark.parametrize(
  "edit,pattern",
  [
    (
      lambda m: m["boxes"].__setitem__(1, [1, 2, 3, 4]),
      r"field 'boxes\[1\]': expected \[x1, y1, x2, y2, score\]",
    ),
    (lambda m: m["boxes"].__setitem__(0, [5, 2, 3, 4, 0.9]), r"field 'boxes\[0\]': invalid box"),
    (lambda m: m.pop("width"), r"field 'width': missing"),
    (lambda m: m["names"].append("person"), r"names/boxes/segms lengths differ: 4/3/3"),
  ],
)
def test_metadata_validation(tmp_path, edit, pattern):
  d = _copy(tmp_path)
  meta = d / "vcr1images" / "synth_movie_1000" / "synth_val_00000@0.json"
  _edit_json(meta, edit)
  with pytest.raises(records.DataError, match=r"synth_val_00000@0\.json: " + pattern):
    records.load_metadata(str(meta))


def test_metadata_clips_boxes(tmp_path):
  d = _copy(tmp_path)
  meta = d / "vcr1images" / "synth_movie_1000" / "synth_val_00000@0.json"
  _edit_json(meta, lambda m: m["boxes"].__setitem__(0, [1, 2, 60, 70, 0.5]))
  got = records.load_metadata(str(meta))
  np.testing.assert_array_equal(got["boxes"][0], [1, 2, 48, 48])
  assert got["scores"][0] == np.float32(0.5)


def test_missing_image_and_bad_features(tmp_path):
  d = _copy(tmp_path)
  os.remove(d / "vcr1images" / "synth_movie_1000" / "synth_val_00001@0.jpg")
  with pytest.raises(
    FileNotFoundError,
    match=r"val_annots\.json: record 2: field 'img_fn': "
    r"image not found: .*synth_val_00001@0\.jpg",
  ):
    _build("ranking", tmp_path / "out1", str(d))
  d2 = tmp_path / "m2"
  shutil.copytree(DUMMY, d2)
  feat = d2 / "features" / "synth_val_00000@0.pkl"
  with open(feat, "wb") as f:
    pickle.dump(
      {
        "image_features": np.zeros(3, np.float32),
        "object_features": np.zeros((3, 2048), np.float32),
      },
      f,
    )
  with pytest.raises(
    records.DataError,
    match=r"field 'image_features': expected float "
    r"\(2048,\), got float32 \(3,\)",
  ):
    _build("images_features", tmp_path / "out2", str(d2))
  with open(feat, "wb") as f:
    f.write(pickle.dumps(os.system))
  with pytest.raises(safe_pickle.UnsafePickleError, match="refusing"):
    _build("images_features", tmp_path / "out3", str(d2))


@pytest.mark.parametrize("config", ["training", "generation_features"])
def test_data_source_reads_what_tfds_decodes(tmp_path, config):
  """The joined source's direct record reader equals TFDS' decoding, field by field."""
  split = "val"
  src = _source(config, tmp_path, split)
  examples = _build(config, tmp_path).as_data_source(split)
  table = _build(vcb.table_config(config), tmp_path).as_data_source(split)
  assert len(src) == len(examples)
  for i in range(len(src)):
    got, ex = src[i], examples[i]
    row = table[int(ex["image_index"])]
    assert _s(row["img_fn"]) == _s(ex["img_fn"])
    want = {**ex, **{k: row[k] for k in ("width", "height", "names", "boxes", "box_scores")}}
    if config.endswith("_features"):
      kept = vcb.sequence.slot_dets(np.asarray(ex["dets"], np.int64))
      want["visual_features"] = np.concatenate(
        [row["image_features"][None], row["object_features"][kept]]
      )
    else:
      want["image"] = row["image"]
    assert got.keys() == want.keys()
    for k in want:
      if isinstance(want[k], np.ndarray):
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
      else:
        assert got[k] == want[k], k
  jpeg = vcb.DataSource(
    _build(config, tmp_path), _build(vcb.table_config(config), tmp_path), split, image="jpeg"
  )
  if not config.endswith("_features"):
    assert isinstance(jpeg[0]["image"], bytes)
    np.testing.assert_array_equal(vcb.decode_jpeg(jpeg[0]["image"]), src[0]["image"])
