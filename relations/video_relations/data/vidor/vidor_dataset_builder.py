"""VidOR (video object relations) as a TFDS dataset, read from the release.

Layout expected in `manual_dir` (the official release, unzipped):

  annotation/training/<group>/<video_id>.json     -> split `train`
  annotation/validation/<group>/<video_id>.json   -> split `validation`
  video/<group>/<video_id>.mp4

  video/<group>/<video_id>.mp4 named by no annotation file -> split `test`

An annotated split is generated when its annotation folder exists. The test
split (ground truth never released) is imported from its videos alone
(`relations/video_relations/data/unannotated.py`): the videos of `video/`
that no training or validation annotation names, with fps, size and frame
count read from the video; it is made only when both annotation folders are
present (otherwise an unannotated training video could not be told from a
test video) or when the id list `test_ids.txt` is, which the videos must
then match exactly. Its examples have no tracks and no relations. The
synthetic generator writes the same layout:

  python -m relations.video_relations.data.synthetic --out /tmp/vidor_syn \
      --num_train 64 --num_val 16 --num_test 4

Build and read (array_record, random access):

  from relations.video_relations.data.vidor import vidor_dataset_builder as vidor
  b = vidor.Builder(data_dir=DATA, config="fps6_short96",
                    file_format="array_record")
  b.download_and_prepare(download_config=tfds.download.DownloadConfig(
      manual_dir="/tmp/vidor_syn"))
  ds = b.as_data_source("train"); ex = ds[0]
  ex["frames"]            # [T, h, w, 3] uint8
  ex["tracks"]["boxes"]   # [T, K, 4] float32 native pixels

Features (full description and data-fault handling in
`relations/video_relations/data/video.py`; T sampled frames, K tracks, R relations,
N annotated native frames):

  frames [T, h, w, 3] uint8 (`vrd_video.frames_array(ex)` from a data
  source), frame_indices [T] native frame of each sampled frame,
  tracks/{tid [K], category [K] (index into VIDOR_OBJECT_CATEGORIES),
  boxes [T, K, 4] native-pixel inclusive xyxy, present [T, K],
  generated [T, K], native_boxes [N, K, 4], native_present [N, K]},
  relations/{subject, object (track indices), subject_tid, object_tid,
  predicate (index into VIDOR_PREDICATES), begin_fid, end_fid (native, end
  exclusive), begin, end (sampled frames, end exclusive)} each [R],
  video_id, video_path, fps, frame_count, num_frames, num_annotated_frames,
  width, height.

Configs
(what is written to disk): `fps6_short96` (default; the synthetic demo,
24 fps videos of 128x96), `fps4_short224` (the `paper` training config: a
30-frame segment of a 30 fps video holds exactly 4 sampled frames),
`fps2_short224`, `fps1_short320`; any
`vrd_video.make_config(fps, short_side)` can be passed as `config=`.

The name `vidor` does not collide with the TFDS 4.9.10 catalog (checked with
`tfds.list_builders()`; no `vidor` / `vidvrd`).
"""

from __future__ import annotations

import functools
import logging

from etils import epath
import tensorflow_datasets as tfds

from relations import tfds_util
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import unannotated
from relations.video_relations.data import video as vrd_video

_SPLITS = {"train": "training", "validation": "validation"}

_INSTRUCTIONS = """\
Download VidOR from https://xdshang.github.io/docs/vidor.html (annotations of
the training and validation sets, and the video parts) and unzip everything
into manual_dir so that it holds `annotation/training/<group>/<id>.json`,
`annotation/validation/<group>/<id>.json` and `video/<group>/<id>.mp4`.
"""


class Builder(tfds_util.BeamOrGenerator, tfds.core.GeneratorBasedBuilder):
  """VidOR: frames, object trajectories and relation instances per video."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {
    "1.0.0": "Initial release: sampled JPEG frames, boxes, "
    "relations with native and sampled frame ids."
  }
  MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
  BUILDER_CONFIGS = [
    vrd_video.make_config(6, 96, "Synthetic demo: 6 fps, short side 96."),
    vrd_video.make_config(
      4, 224, "4 fps, short side 224 (paper config: 4 sampled frames per 30-frame segment)."
    ),
    vrd_video.make_config(2, 224, "2 fps, short side 224."),
    vrd_video.make_config(1, 320, "1 fps, short side 320."),
  ]

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=vrd_video.features(
        vrd_categories.VIDOR_OBJECT_CATEGORIES, vrd_categories.VIDOR_PREDICATES
      ),
      homepage="https://xdshang.github.io/docs/vidor.html",
    )

  def _split_generators(self, dl_manager):
    root = epath.Path(dl_manager.manual_dir)
    found = {
      split: root / "annotation" / folder
      for split, folder in _SPLITS.items()
      if (root / "annotation" / folder).is_dir()
    }
    if not found:
      raise vrd_video.missing_layout_error(
        root, [f"annotation/{f}" for f in _SPLITS.values()], _INSTRUCTIONS
      )
    splits = {split: self._generate_examples(root, folder) for split, folder in found.items()}
    test = self._test_videos(root, found)
    if test:
      splits["test"] = self.key_examples(
        [(str(p), vid, f"video/{p.parent.name}/{p.name}") for vid, p in test.items()],
        functools.partial(unannotated.video_example, config=self.builder_config, dataset="vidor"),
      )
    return splits

  def _test_videos(self, root: epath.Path, found: dict) -> dict:
    """{video id: file} of the unannotated test split (module docstring); {} when none."""
    id_list = root / "test_ids.txt"
    if not (root / "video").is_dir() or (len(found) < len(_SPLITS) and not id_list.exists()):
      return {}
    videos = {p.stem: p for p in (root / "video").glob("*/*.mp4")}
    annotated = {p.stem for folder in found.values() for p in folder.glob("*/*.json")}
    return unannotated.select_videos(videos, annotated, id_list)

  def _generate_examples(self, root: epath.Path, folder: epath.Path):
    """(video id, example) per annotation file: a generator, or a Beam PTransform under Beam."""
    files = sorted(folder.glob("*/*.json"))
    if not files:
      raise FileNotFoundError(f"{folder}: no <group>/<video_id>.json files")
    # Paths travel as strings (picklable to Beam workers on any filesystem).
    return self.key_examples(
      [str(p) for p in files],
      functools.partial(_video_example, root=str(root), config=self.builder_config),
    )


def _video_example(path: str, root: str, config: vrd_video.VrdConfig):
  """[(video id, example)] of one VidOR annotation file and its video (decoded here)."""
  path = epath.Path(path)
  anno = vrd_json.read_annotation(
    path,
    dataset="vidor",
    categories=vrd_categories.VIDOR_OBJECT_CATEGORIES,
    predicates=vrd_categories.VIDOR_PREDICATES,
  )
  group = path.parent.name
  if anno.video_id != path.stem:
    raise vrd_json.AnnotationError(
      f"{path}: field 'video_id' {anno.video_id!r} does not match the file name"
    )
  rel = f"{group}/{anno.video_id}.mp4"
  if anno.video_path is not None and anno.video_path != rel:
    logging.warning(
      "%s: video_path %r differs from the layout; using %s", path, anno.video_path, rel
    )
  return [
    (
      anno.video_id,
      vrd_video.make_example(
        anno,
        epath.Path(root) / "video" / rel,
        f"video/{rel}",
        config,
        vrd_categories.object_to_id("vidor"),
        vrd_categories.predicate_to_id("vidor"),
      ),
    )
  ]
