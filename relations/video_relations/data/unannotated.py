"""Splits imported from their videos alone (VidOR test, ImageNet-VidVRD test with withheld labels).

The VidOR test split (2,165 videos) never had public annotations, and a VidVRD user may hold
the test videos without `test/`. Such a split is built from the videos: a video of the release's
video folder that no annotation file of the other splits names belongs to it. Its examples have
the same features as annotated ones with zero tracks and zero relations, and the video metadata
(`fps`, `width`, `height`, `frame_count`) is read from the video container
(`probe_video`) instead of an annotation.

Official id list (optional): where `<manual_dir>/<split>_ids.txt` exists (one video id per line,
VidOR ids may be written `<group>/<id>`; blank lines and `#` comments ignored), the videos found
must be exactly those ids: a listed id without a video, or a video that is not listed, is an
error naming the list file and the id, so a partial download or a stray video never becomes a
silently different split.
"""

from __future__ import annotations

import dataclasses
import fractions

import av
from etils import epath
import numpy as np

from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import video as vrd_video


@dataclasses.dataclass(frozen=True)
class VideoInfo:
  """Metadata of a video file: native frames, frames per second, pixel size."""

  frame_count: int
  fps: float
  width: int
  height: int


def probe_video(path: epath.Path) -> VideoInfo:
  """Reads `VideoInfo` from the container of `path` (no frame is decoded).

  The frame count is the stream's declared count (MP4 `stts`) and, where the container declares
  none, the number of non-empty packets. `make_example` still decodes, and a video that decodes
  to fewer frames than declared keeps only the decoded ones (`num_frames`).

  Raises:
    FileNotFoundError: no such file.
    vrd_video.VideoError: not a video, or no usable frame rate / size.
  """
  path = epath.Path(path)
  if not path.exists():
    raise FileNotFoundError(f"{path}: no such video")
  try:
    with av.open(str(path), mode="r") as container:
      if not container.streams.video:
        raise vrd_video.VideoError(f"{path}: no video stream")
      stream = container.streams.video[0]
      rate = stream.average_rate or stream.guessed_rate
      width, height = int(stream.codec_context.width), int(stream.codec_context.height)
      frames = int(stream.frames or 0)
      if frames <= 0:
        frames = sum(1 for p in container.demux(stream) if p.size)
  except vrd_video.VideoError:
    raise
  except (av.FFmpegError, ValueError, OSError, EOFError) as e:
    raise vrd_video.VideoError(f"{path}: cannot read the video: {e}") from e
  if not rate or float(rate) <= 0:
    raise vrd_video.VideoError(f"{path}: the video declares no frame rate")
  if width <= 0 or height <= 0 or frames <= 0:
    raise vrd_video.VideoError(
      f"{path}: unusable video (width {width}, height {height}, {frames} frames)"
    )
  return VideoInfo(frames, float(fractions.Fraction(rate)), width, height)


def video_annotation(
  path: epath.Path, video_id: str, video_path: str | None
) -> vrd_json.VideoAnnotation:
  """A `VideoAnnotation` with no object and no relation, its metadata read from the video."""
  info = probe_video(path)
  return vrd_json.VideoAnnotation(
    path=str(path),
    video_id=video_id,
    version=None,
    video_path=video_path,
    frame_count=info.frame_count,
    fps=info.fps,
    width=info.width,
    height=info.height,
    tids=np.zeros((0,), np.int64),
    categories=(),
    boxes=np.zeros((0, 0, 4), np.float64),
    present=np.zeros((0, 0), bool),
    generated=np.zeros((0, 0), bool),
    subject=np.zeros((0,), np.int64),
    object=np.zeros((0,), np.int64),
    predicates=(),
    begin_fid=np.zeros((0,), np.int64),
    end_fid=np.zeros((0,), np.int64),
  )


def read_id_list(path: epath.Path) -> list[str]:
  """Video ids of an id list file (module docstring); `<group>/<id>` lines give `<id>`."""
  ids = []
  for line in epath.Path(path).read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
      ids.append(line.rsplit("/", 1)[-1].removesuffix(".mp4"))
  return ids


def select_videos(
  videos: dict[str, epath.Path], annotated: set[str], id_list: epath.Path | None
) -> dict[str, epath.Path]:
  """The videos of an unannotated split: `videos` (id -> file) minus the `annotated` ids,
  checked against `id_list` where it exists (module docstring).

  Raises:
    ValueError: the videos found differ from the id list (the message names the file and ids).
  """
  chosen = {v: p for v, p in sorted(videos.items()) if v not in annotated}
  if id_list is not None and id_list.exists():
    listed = read_id_list(id_list)
    missing = [v for v in listed if v not in chosen]
    extra = sorted(set(chosen) - set(listed))
    if missing or extra:
      parts = []
      if missing:
        parts.append(f"{len(missing)} listed video(s) without a file, e.g. {missing[:3]}")
      if extra:
        parts.append(f"{len(extra)} video(s) not in the list, e.g. {extra[:3]}")
      raise ValueError(
        f"{id_list}: the split's videos differ from this id list: {'; '.join(parts)}"
      )
  return chosen


def video_example(item: tuple[str, str, str], config, dataset: str):
  """[(video id, example)] of one unannotated video; `item` = (file, video id, path relative to
  the release root). Picklable with `functools.partial` (Beam workers)."""
  from relations.video_relations.data import categories as vrd_categories  # pylint: disable=g-import-not-at-top

  path, video_id, rel = item
  anno = video_annotation(epath.Path(path), video_id, rel)
  return [
    (
      video_id,
      vrd_video.make_example(
        anno,
        epath.Path(path),
        rel,
        config,
        vrd_categories.object_to_id(dataset),
        vrd_categories.predicate_to_id(dataset),
      ),
    )
  ]
