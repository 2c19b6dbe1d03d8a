"""Splits imported from their videos alone (data/unannotated.py)."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from relations.video_relations.data import synthetic
from relations.video_relations.data import unannotated
from relations.video_relations.data import video as vrd_video
from relations.video_relations.data.vidor import vidor_dataset_builder as vidor


def test_probe_video_reads_the_container(tmp_path):
  path = tmp_path / "v.mp4"
  path.write_bytes(synthetic.write_mp4(np.zeros((7, 16, 32, 3), np.uint8), fps=24))
  assert unannotated.probe_video(path) == unannotated.VideoInfo(7, 24.0, 32, 16)
  anno = unannotated.video_annotation(path, "v", "video/0000/v.mp4")
  assert (anno.frame_count, anno.width, anno.height, anno.fps) == (7, 32, 16, 24.0)
  assert anno.num_annotated_frames == 0 and anno.num_relations == 0 and not anno.categories
  bad = tmp_path / "bad.mp4"
  bad.write_bytes(b"not a video")
  with pytest.raises(vrd_video.VideoError, match="bad.mp4"):
    unannotated.probe_video(bad)
  with pytest.raises(FileNotFoundError, match="nope.mp4"):
    unannotated.probe_video(tmp_path / "nope.mp4")


def test_select_videos_against_the_id_list(tmp_path):
  videos = {v: tmp_path / f"{v}.mp4" for v in ("a", "b", "c")}
  ids = tmp_path / "test_ids.txt"
  assert list(unannotated.select_videos(videos, {"a"}, ids)) == ["b", "c"]  # no list: no check
  ids.write_text("# VidOR test\n0001/b\nc.mp4\n\n")
  assert list(unannotated.select_videos(videos, {"a"}, ids)) == ["b", "c"]
  ids.write_text("b\nd\n")
  with pytest.raises(ValueError) as e:
    unannotated.select_videos(videos, {"a"}, ids)
  msg = str(e.value)
  assert str(ids) in msg and "['d']" in msg and "['c']" in msg


def test_vidor_test_split_needs_both_annotation_folders_or_an_id_list(tmp_path):
  raw = tmp_path / "raw"
  synthetic.generate(str(raw), 1, 1, seed=2, min_frames=20, max_frames=24, num_test=1)
  (raw / "annotation" / "validation").rename(tmp_path / "validation")
  b = vidor.Builder(data_dir=str(tmp_path / "tfds"), config="fps6_short96")
  dl = tfds.download.DownloadManager(
    download_dir=str(tmp_path / "dl"),
    manual_dir=str(raw),
    manual_dir_instructions=vidor.Builder.MANUAL_DOWNLOAD_INSTRUCTIONS,
  )
  # Without the validation annotation a validation video cannot be told from a test video.
  assert set(b._split_generators(dl)) == {"train"}  # pylint: disable=protected-access
  test_id = synthetic.video_id_of(2, "testing", 0)
  (raw / "test_ids.txt").write_text(f"{test_id}\n")
  # With an id list the unannotated videos must be exactly the listed ones: here the
  # validation video is one too many.
  with pytest.raises(ValueError, match="test_ids.txt: the split's videos differ"):
    b._split_generators(dl)  # pylint: disable=protected-access
  (tmp_path / "validation").rename(raw / "annotation" / "validation")
  assert set(b._split_generators(dl)) == {"train", "validation", "test"}  # pylint: disable=protected-access
