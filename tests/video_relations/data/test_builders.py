"""VidOR / ImageNet-VidVRD TFDS builders: DatasetBuilderTestCase per layout,
known values read back through `as_data_source`, and bad-input errors."""

import json
import os
import shutil

import av
import numpy as np
import pytest
import tensorflow_datasets as tfds

from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import video as vrd_video
from relations.video_relations.data.vidor import vidor_dataset_builder as vidor
from relations.video_relations.data.vidvrd import vidvrd_dataset_builder as vidvrd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VIDOR_DUMMY = os.path.join(ROOT, "relations/video_relations/data/vidor/dummy_data")
VIDVRD_DUMMY = os.path.join(ROOT, "relations/video_relations/data/vidvrd/dummy_data")
# Training video 0 declares 3 more frames than its MP4 holds; training video
# 1 lost its last 2 annotated frames (see tests/video_relations/data/make_dummy_data.py).
SHORT_VIDEO = "5110000000"
TRUNCATED = "5110000001"


class VidorBuilderTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vidor.Builder
  SPLITS = {"train": 2, "validation": 1}
  EXAMPLE_DIR = VIDOR_DUMMY


class VidvrdBuilderTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = vidvrd.Builder
  SPLITS = {"train": 2, "test": 1}
  EXAMPLE_DIR = VIDVRD_DUMMY


def _build(module, manual, data_dir, config=None):
  b = module.Builder(data_dir=str(data_dir), config=config, file_format="array_record")
  b.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(manual)))
  return b


def _examples(builder, split):
  return {ex["video_id"].decode(): ex for ex in builder.as_data_source(split)}


def _decode_all(path):
  with av.open(path) as c:
    return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def test_names_resolve_to_our_builders():
  # A TFDS catalog dataset of the same name would take precedence.
  assert tfds.builder_cls("vidor") is vidor.Builder
  assert tfds.builder_cls("vidvrd") is vidvrd.Builder
  assert [c.name for c in vidor.Builder.BUILDER_CONFIGS] == [
    "fps6_short96",
    "fps4_short224",
    "fps2_short224",
    "fps1_short320",
  ]


def test_vidor_known_values(tmp_path):
  b = _build(vidor, VIDOR_DUMMY, tmp_path)
  ex = _examples(b, "train")
  annos = {
    p[:-5]: vrd_json.read_annotation(os.path.join(VIDOR_DUMMY, "annotation/training/0000", p))
    for p in os.listdir(os.path.join(VIDOR_DUMMY, "annotation/training/0000"))
  }

  # The MP4 has 17 frames, the annotation declares 20: 17 are used, sampled
  # every 24 / 6 = 4 native frames.
  e = ex[SHORT_VIDEO]
  a = annos[SHORT_VIDEO]
  assert (int(e["frame_count"]), int(e["num_frames"]), int(e["num_annotated_frames"])) == (
    20,
    17,
    17,
  )
  np.testing.assert_array_equal(e["frame_indices"], [0, 4, 8, 12, 16])
  frames = vrd_video.frames_array(e)
  assert frames.shape == (5, 48, 64, 3) and frames.dtype == np.uint8
  native = _decode_all(os.path.join(VIDOR_DUMMY, "video/0000", f"{SHORT_VIDEO}.mp4"))
  assert native.shape[0] == 17
  # JPEG at quality 90 of the decoded frame: no native frame is closer.
  for k, i in enumerate(e["frame_indices"]):
    diffs = np.abs(frames[k][None].astype(int) - native).mean((1, 2, 3))
    assert diffs[i] < 3 and diffs[i] == diffs.min(), (k, diffs)
  np.testing.assert_array_equal(e["tracks"]["tid"], a.tids)
  np.testing.assert_array_equal(
    e["tracks"]["category"], [vrd_categories.object_to_id("vidor")[c] for c in a.categories]
  )
  np.testing.assert_array_equal(
    e["tracks"]["boxes"], a.boxes[e["frame_indices"]].astype(np.float32)
  )
  np.testing.assert_array_equal(e["tracks"]["present"], a.present[e["frame_indices"]])
  np.testing.assert_array_equal(e["tracks"]["native_boxes"], a.boxes.astype(np.float32))

  # Relations: native ids kept, sampled [begin, end) covers exactly the
  # sampled frames inside [begin_fid, end_fid).
  r = e["relations"]
  np.testing.assert_array_equal(r["begin_fid"], a.begin_fid)
  np.testing.assert_array_equal(r["end_fid"], a.end_fid)
  np.testing.assert_array_equal(
    r["predicate"], [vrd_categories.predicate_to_id("vidor")[p] for p in a.predicates]
  )
  idx = e["frame_indices"]
  for i in range(len(r["begin"])):
    inside = np.nonzero((idx >= r["begin_fid"][i]) & (idx < r["end_fid"][i]))[0]
    assert list(range(r["begin"][i], r["end"][i])) == inside.tolist()
  np.testing.assert_array_equal(a.tids[r["subject"]], r["subject_tid"])


def test_vidor_truncated_trajectories(tmp_path):
  b = _build(vidor, VIDOR_DUMMY, tmp_path)
  e = _examples(b, "train")[TRUNCATED]
  a = vrd_json.read_annotation(
    os.path.join(VIDOR_DUMMY, "annotation/training/0000", f"{TRUNCATED}.json")
  )
  n = a.num_annotated_frames
  assert (int(e["frame_count"]), int(e["num_frames"]), n) == (20, 20, 18 - 2)
  # Sampled frame 16 is past the annotation: no boxes there.
  np.testing.assert_array_equal(e["frame_indices"], [0, 4, 8, 12, 16])
  assert not e["tracks"]["present"][-1].any()
  assert e["tracks"]["native_present"].shape[0] == n
  # Relation 0 was extended to frame_count (clipped to n), relation 1 starts
  # at n (dropped); the others keep their begin and are clipped to n.
  r = e["relations"]
  assert len(r["begin_fid"]) == a.num_relations - 1
  assert r["end_fid"][0] == n and a.end_fid[0] == 20
  np.testing.assert_array_equal(r["begin_fid"][1:], a.begin_fid[2:])
  np.testing.assert_array_equal(r["end_fid"][1:], np.minimum(a.end_fid[2:], n))
  assert (a.end_fid[2:] > n).any()


def test_vidvrd_known_values(tmp_path):
  b = _build(vidvrd, VIDVRD_DUMMY, tmp_path)
  assert set(b.info.splits) == {"train", "test"}
  e = _examples(b, "test")["ILSVRC2015_test_00000000"]
  a = vrd_json.read_annotation(
    os.path.join(VIDVRD_DUMMY, "test/ILSVRC2015_test_00000000.json"), dataset="vidvrd"
  )
  assert e["video_path"].decode() == "videos/ILSVRC2015_test_00000000.mp4"
  np.testing.assert_array_equal(
    e["tracks"]["category"], [vrd_categories.object_to_id("vidvrd")[c] for c in a.categories]
  )
  names = [vrd_categories.VIDVRD_PREDICATES[i] for i in e["relations"]["predicate"]]
  assert names == list(a.predicates)


def test_custom_config_every_frame_and_downscale(tmp_path):
  config = vrd_video.make_config(None, 24)
  assert config.name == "all_frames_short24"
  b = _build(vidor, VIDOR_DUMMY, tmp_path, config=config)
  e = _examples(b, "validation")["5111000000"]
  frames = vrd_video.frames_array(e)
  n = int(e["num_frames"])
  assert frames.shape == (n, 24, 32, 3)
  np.testing.assert_array_equal(e["frame_indices"], np.arange(n))
  r = e["relations"]
  np.testing.assert_array_equal(r["begin"], r["begin_fid"])
  np.testing.assert_array_equal(r["end"], r["end_fid"])


def test_sample_indices():
  np.testing.assert_array_equal(vrd_video.sample_indices(10, 24, 6), [0, 4, 8])
  # 29.97 fps to 2 fps: floor(k * 14.985).
  np.testing.assert_array_equal(vrd_video.sample_indices(61, 29.97, 2), [0, 14, 29, 44, 59])
  np.testing.assert_array_equal(vrd_video.sample_indices(3, 24, None), [0, 1, 2])
  np.testing.assert_array_equal(vrd_video.sample_indices(3, 24, 30), [0, 1, 2])
  assert vrd_video.target_size(1920, 1080, 224) == (398, 224)
  assert vrd_video.target_size(64, 48, 96) == (64, 48)


def _copy(tmp_path, src):
  dst = tmp_path / "manual"
  shutil.copytree(src, dst)
  return dst


def _vidor_file(manual, vid, kind):
  if kind == "json":
    return manual / "annotation/training/0000" / f"{vid}.json"
  return manual / "video/0000" / f"{vid}.mp4"


def test_malformed_json_names_file(tmp_path):
  manual = _copy(tmp_path, VIDOR_DUMMY)
  bad = _vidor_file(manual, TRUNCATED, "json")
  bad.write_text(bad.read_text()[:-10])
  with pytest.raises(vrd_json.AnnotationError, match=f"{bad}: malformed JSON"):
    _build(vidor, manual, tmp_path / "data")


def test_unknown_category_names_file_record_field(tmp_path):
  manual = _copy(tmp_path, VIDOR_DUMMY)
  path = _vidor_file(manual, SHORT_VIDEO, "json")
  data = json.loads(path.read_text())
  data["subject/objects"][1]["category"] = "unicorn"
  path.write_text(json.dumps(data))
  with pytest.raises(
    vrd_json.AnnotationError,
    match=(
      rf"{path}: subject/objects\[1\]: field "
      "'category' 'unicorn' is not a known category"
    ),
  ):
    _build(vidor, manual, tmp_path / "data")


def test_unreadable_video_names_file(tmp_path):
  manual = _copy(tmp_path, VIDOR_DUMMY)
  video = _vidor_file(manual, TRUNCATED, "mp4")
  video.write_bytes(b"not a video at all" * 10)
  with pytest.raises(vrd_video.VideoError, match=f"{video}: cannot decode video"):
    _build(vidor, manual, tmp_path / "data")


def test_missing_video_names_video_and_annotation(tmp_path):
  manual = _copy(tmp_path, VIDVRD_DUMMY)
  video = manual / "videos/ILSVRC2015_train_00000001.mp4"
  video.unlink()
  with pytest.raises(
    FileNotFoundError,
    match=f"{video}: video of annotation .*ILSVRC2015_train_00000001.json is missing",
  ):
    _build(vidvrd, manual, tmp_path / "data")


def test_vidvrd_rejects_version_field(tmp_path):
  manual = _copy(tmp_path, VIDVRD_DUMMY)
  path = manual / "test/ILSVRC2015_test_00000000.json"
  data = json.loads(path.read_text())
  data["version"] = "VERSION 1.0"
  path.write_text(json.dumps(data))
  with pytest.raises(
    vrd_json.AnnotationError, match=f"{path}: ImageNet-VidVRD annotations have no 'version' field"
  ):
    _build(vidvrd, manual, tmp_path / "data")


def test_missing_layout_lists_expected_folders(tmp_path):
  manual = tmp_path / "manual"
  (manual / "videos").mkdir(parents=True)  # VidVRD layout given to VidOR.
  with pytest.raises(
    FileNotFoundError,
    match=f"{manual}: none of the expected folders exist: "
    "annotation/training, annotation/validation",
  ):
    _build(vidor, manual, tmp_path / "data")
