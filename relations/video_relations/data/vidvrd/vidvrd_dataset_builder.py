"""ImageNet-VidVRD as a TFDS dataset, read from the release.

Layout expected in `manual_dir` (the official release, unzipped):

  train/<video_id>.json    -> split `train` (sparsely labelled segments)
  test/<video_id>.json     -> split `test` (fully labelled)
  videos/<video_id>.mp4

Without `test/` (labels withheld), the test split is imported from its
videos alone (`relations/video_relations/data/unannotated.py`): the videos of
`videos/` that no `train/` annotation names, fps, size and frame count read
from the video, no tracks or relations; made only when `train/` exists or the
id list `test_ids.txt` does (the videos must then match it exactly).

Annotations have no `version` field (asserted, as in VidVRD-helper).
Build and read exactly like `vidor` (see vidor_dataset_builder):

  from relations.video_relations.data.vidvrd import vidvrd_dataset_builder as vidvrd
  b = vidvrd.Builder(data_dir=DATA, config="fps6_short96",
                     file_format="array_record")
  b.download_and_prepare(download_config=tfds.download.DownloadConfig(
      manual_dir=MANUAL))
  ex = b.as_data_source("test")[0]

Features are described in `relations/video_relations/data/video.py`; categories and
predicates are the 35 / 132 ImageNet-VidVRD names of vrd_categories. Configs:
`fps6_short96` (default), `fps4_short224`, `fps2_short224`, `fps1_short320`.

The name `vidvrd` does not collide with the TFDS 4.9.10 catalog.
"""

from __future__ import annotations

import functools

from etils import epath
import tensorflow_datasets as tfds

from relations import tfds_util
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import unannotated
from relations.video_relations.data import video as vrd_video

_SPLITS = ("train", "test")

_INSTRUCTIONS = """\
Download ImageNet-VidVRD from https://xdshang.github.io/docs/imagenet-vidvrd.html
(the annotation archive and the videos) and unzip them into manual_dir so that
it holds `train/<id>.json`, `test/<id>.json` and `videos/<id>.mp4`.
"""


class Builder(tfds_util.BeamOrGenerator, tfds.core.GeneratorBasedBuilder):
  """ImageNet-VidVRD: frames, trajectories and relation instances per video."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {
    "1.0.0": "Initial release: sampled JPEG frames, boxes, "
    "relations with native and sampled frame ids."
  }
  MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
  BUILDER_CONFIGS = [
    vrd_video.make_config(6, 96, "6 fps, short side 96."),
    vrd_video.make_config(4, 224, "4 fps, short side 224 (paper config)."),
    vrd_video.make_config(2, 224, "2 fps, short side 224."),
    vrd_video.make_config(1, 320, "1 fps, short side 320."),
  ]

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=vrd_video.features(
        vrd_categories.VIDVRD_OBJECT_CATEGORIES, vrd_categories.VIDVRD_PREDICATES
      ),
      homepage="https://xdshang.github.io/docs/imagenet-vidvrd.html",
    )

  def _split_generators(self, dl_manager):
    root = epath.Path(dl_manager.manual_dir)
    found = [s for s in _SPLITS if (root / s).is_dir()]
    if not found:
      raise vrd_video.missing_layout_error(root, list(_SPLITS), _INSTRUCTIONS)
    splits = {s: self._generate_examples(root, root / s) for s in found}
    test = self._test_videos(root, found)
    if test:
      splits["test"] = self.key_examples(
        [(str(p), vid, f"videos/{p.name}") for vid, p in test.items()],
        functools.partial(unannotated.video_example, config=self.builder_config, dataset="vidvrd"),
      )
    return splits

  def _test_videos(self, root: epath.Path, found: list) -> dict:
    """{video id: file} of an unannotated test split (module docstring); {} when none."""
    id_list = root / "test_ids.txt"
    if "test" in found or not (root / "videos").is_dir():
      return {}
    if "train" not in found and not id_list.exists():
      return {}
    videos = {p.stem: p for p in (root / "videos").glob("*.mp4")}
    annotated = {p.stem for s in found for p in (root / s).glob("*.json")}
    return unannotated.select_videos(videos, annotated, id_list)

  def _generate_examples(self, root: epath.Path, folder: epath.Path):
    """(video id, example) per annotation file: a generator, or a Beam PTransform under Beam."""
    files = sorted(folder.glob("*.json"))
    if not files:
      raise FileNotFoundError(f"{folder}: no <video_id>.json files")
    return self.key_examples(
      [str(p) for p in files],
      functools.partial(_video_example, root=str(root), config=self.builder_config),
    )


def _video_example(path: str, root: str, config: vrd_video.VrdConfig):
  """[(video id, example)] of one VidVRD annotation file and its video (decoded here)."""
  path = epath.Path(path)
  anno = vrd_json.read_annotation(
    path,
    dataset="vidvrd",
    categories=vrd_categories.VIDVRD_OBJECT_CATEGORIES,
    predicates=vrd_categories.VIDVRD_PREDICATES,
  )
  if anno.video_id != path.stem:
    raise vrd_json.AnnotationError(
      f"{path}: field 'video_id' {anno.video_id!r} does not match the file name"
    )
  rel = f"videos/{anno.video_id}.mp4"
  return [
    (
      anno.video_id,
      vrd_video.make_example(
        anno,
        epath.Path(root) / rel,
        rel,
        config,
        vrd_categories.object_to_id("vidvrd"),
        vrd_categories.predicate_to_id("vidvrd"),
      ),
    )
  ]
