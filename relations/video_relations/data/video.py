"""Shared example construction for the `vidor` and `vidvrd` TFDS builders.

Decodes one video with PyAV, samples frames at a configured rate, resizes them
to a configured short side, JPEG-encodes them, and joins them with the
annotation of `vrd_json.VideoAnnotation` into one TFDS example.

Example features (T sampled frames, K objects, R relations, N native frames
that carry annotation slots, see `features`):

  video_id              str (bytes from `as_data_source`)
  video_path            str, video file relative to manual_dir
  fps                   float64, native frames per second (annotation)
  frame_count           int32, declared native frame count (annotation)
  num_frames            int32, native frames used: min(decoded, frame_count)
  num_annotated_frames  int32, len(trajectories) in the annotation
  width, height         int32, native frame size (annotation); boxes use it
  frames                [T, h, w, 3] uint8 JPEG frames, h/w = native size
                        scaled so that the short side is <= config.short_side
                        (`as_data_source` returns a list of T [h, w, 3]
                        arrays; `frames_array(example)` stacks them)
  frame_indices         [T] int32 native index of each sampled frame
  tracks/tid            [K] int32 annotation track ids
  tracks/category       [K] int32 index into the dataset's object category
                        list (vrd_categories.object_categories(dataset))
  tracks/boxes          [T, K, 4] float32 (xmin, ymin, xmax, ymax) in native
                        pixels, inclusive corners as annotated; 0 if absent
  tracks/present        [T, K] bool, object annotated in the sampled frame
  tracks/generated      [T, K] bool, box marked `generated: 1`
  tracks/native_boxes   [N, K, 4] float32, every native frame (N = min(
                        num_annotated_frames, num_frames))
  tracks/native_present [N, K] bool
  relations/subject     [R] int32 index into the K tracks
  relations/object      [R] int32
  relations/subject_tid, relations/object_tid  [R] int32
  relations/predicate   [R] int32 index into vrd_categories.predicates(dataset)
  relations/begin_fid   [R] int32 native begin frame (inclusive)
  relations/end_fid     [R] int32 native end frame (exclusive), clipped to N
  relations/begin       [R] int32 first sampled frame with index >= begin_fid
  relations/end         [R] int32 first sampled frame with index >= end_fid;
                        sampled frames [begin, end) lie in the relation. It
                        can equal `begin` for a relation shorter than the
                        sampling stride.

Normalised boxes for the stored frames: x / width, y / height for the top-left
corner and (x + 1) / width, (y + 1) / height for the inclusive bottom-right.

Sampling (`sample_indices`, with the annotation's `fps`): frame k of the output is native frame
floor(k * fps / config.fps), k = 0, 1, ... while < num_frames; every native
frame when config.fps is None or >= fps.

Data faults handled here (in addition to vrd_json):
  - The video decodes to fewer frames than `frame_count`: only the decoded
    frames are used (`num_frames`); a video longer than `frame_count` is cut
    at `frame_count`.
  - `frame_count > len(trajectories)`: frames past the annotation have no
    boxes (`present` False).
  - A relation's `end_fid` past the annotated/decoded frames is clipped to N;
    a relation that starts at or after N is dropped (counted in the log).
  - Decoded frames whose size differs from the annotation's width/height are
    resized to the annotation's aspect ratio, so boxes stay consistent.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math

import av
import cv2
from etils import epath
import numpy as np
import tensorflow_datasets as tfds

from relations.video_relations.data import annotations as vrd_json


class VideoError(ValueError):
  """A video file is missing frames or cannot be decoded; names the file."""


@dataclasses.dataclass(eq=False)
class VrdConfig(tfds.core.BuilderConfig):
  """What is written to disk: sampling rate and frame size.

  Attributes:
    fps: sampled frames per second; None keeps every native frame.
    short_side: the stored frames' short side is at most this many pixels
      (frames are only ever downscaled); None keeps the native size.
    jpeg_quality: JPEG quality of the stored frames (0-100).
  """

  fps: float | None = 6.0
  short_side: int | None = 96
  jpeg_quality: int = 90


def make_config(fps: float | None, short_side: int | None, description: str = "") -> VrdConfig:
  """A config named e.g. `fps6_short96` (`all_frames` / `native` for None)."""
  fps_name = "all_frames" if fps is None else f"fps{fps:g}"
  size_name = "native" if short_side is None else f"short{short_side}"
  return VrdConfig(
    name=f"{fps_name}_{size_name}", fps=fps, short_side=short_side, description=description
  )


def features(categories, predicates) -> tfds.features.FeaturesDict:
  """The example features (module docstring) for a category/predicate list."""
  i32 = np.int32

  def dyn(shape, dtype):
    return tfds.features.Tensor(shape=shape, dtype=dtype, encoding="zlib")

  def vec(dtype=i32):
    return tfds.features.Tensor(shape=(None,), dtype=dtype)

  del categories, predicates  # Class indices, names in vrd_categories.
  return tfds.features.FeaturesDict(
    {
      "video_id": tfds.features.Text(),
      "video_path": tfds.features.Text(),
      "fps": tfds.features.Scalar(np.float64),
      "frame_count": tfds.features.Scalar(i32),
      "num_frames": tfds.features.Scalar(i32),
      "num_annotated_frames": tfds.features.Scalar(i32),
      "width": tfds.features.Scalar(i32),
      "height": tfds.features.Scalar(i32),
      "frames": tfds.features.Video(shape=(None, None, None, 3), encoding_format="jpeg"),
      "frame_indices": vec(),
      "tracks": tfds.features.FeaturesDict(
        {
          "tid": vec(),
          "category": vec(),
          "boxes": dyn((None, None, 4), np.float32),
          "present": dyn((None, None), np.bool_),
          "generated": dyn((None, None), np.bool_),
          "native_boxes": dyn((None, None, 4), np.float32),
          "native_present": dyn((None, None), np.bool_),
        }
      ),
      # Plain [R] arrays rather than a Sequence, so that `as_data_source`
      # returns numpy arrays (a Sequence decodes to Python lists there).
      "relations": tfds.features.FeaturesDict(
        {
          key: vec()
          for key in (
            "subject",
            "object",
            "subject_tid",
            "object_tid",
            "predicate",
            "begin_fid",
            "end_fid",
            "begin",
            "end",
          )
        }
      ),
    }
  )


def sample_indices(num_frames: int, native_fps: float, fps: float | None) -> np.ndarray:
  """Native indices of the sampled frames: floor(k * native_fps / fps).

  Args:
    num_frames: number of native frames available.
    native_fps: frames per second of the video.
    fps: target rate; None (or >= native_fps) keeps every frame.

  Returns:
    [T] int64 strictly increasing indices in [0, num_frames).
  """
  if fps is None or fps >= native_fps:
    return np.arange(num_frames, dtype=np.int64)
  step = native_fps / fps
  k = np.arange(int(math.ceil(num_frames / step)) + 1)
  # The small epsilon keeps exact multiples (e.g. 24 / 6 * 3 = 12) from
  # rounding down to the previous frame in floating point.
  idx = np.floor(k * step + 1e-6).astype(np.int64)
  return idx[idx < num_frames]


def target_size(width: int, height: int, short_side: int | None) -> tuple[int, int]:
  """(w, h) with the short side scaled down to `short_side` (never up)."""
  if short_side is None or min(width, height) <= short_side:
    return width, height
  scale = short_side / min(width, height)
  return (max(1, int(round(width * scale))), max(1, int(round(height * scale))))


def decode_frames(
  video: epath.Path, wanted: np.ndarray, limit: int, size: tuple[int, int], jpeg_quality: int
) -> tuple[list[bytes], int]:
  """Decodes `video`, keeping the frames at the `wanted` native indices.

  Args:
    video: the video file.
    wanted: sorted native frame indices to keep.
    limit: decode at most this many frames (the declared frame_count).
    size: (w, h) of the stored frames.
    jpeg_quality: JPEG quality.

  Returns:
    (JPEG bytes of the kept frames, number of frames decoded (<= limit)).

  Raises:
    FileNotFoundError: the file does not exist.
    VideoError: the file cannot be decoded or has no video stream.
  """
  data = video.read_bytes()
  wanted_set = set(int(i) for i in wanted)
  out: list[bytes] = []
  decoded = 0
  try:
    with av.open(io.BytesIO(data), mode="r") as container:
      if not container.streams.video:
        raise VideoError(f"{video}: no video stream")
      stream = container.streams.video[0]
      stream.thread_type = "AUTO"
      for frame in container.decode(stream):
        if decoded >= limit:
          break
        if decoded in wanted_set:
          rgb = frame.to_ndarray(format="rgb24")
          if (rgb.shape[1], rgb.shape[0]) != size:
            rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
          ok, buf = cv2.imencode(
            ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]
          )
          if not ok:
            raise VideoError(f"{video}: JPEG encoding of frame {decoded} failed")
          out.append(buf.tobytes())
        decoded += 1
  except VideoError:
    raise
  except (av.FFmpegError, ValueError, OSError, EOFError) as e:
    raise VideoError(f"{video}: cannot decode video: {e}") from e
  return out, decoded


def make_example(
  anno: vrd_json.VideoAnnotation,
  video: epath.Path,
  video_path: str,
  config: VrdConfig,
  category_index,
  predicate_index,
) -> dict:
  """Decodes `video` and builds the example dict (module docstring).

  Args:
    anno: the validated annotation.
    video: the video file.
    video_path: `video` relative to manual_dir (stored as a feature).
    config: sampling and size.
    category_index: name -> class index of the object categories.
    predicate_index: name -> class index of the predicates.

  Returns:
    The example dict for `features`.

  Raises:
    FileNotFoundError: `video` is missing (the message names the annotation).
    VideoError: undecodable video or no frame decoded.
  """
  if not video.exists():
    raise FileNotFoundError(f"{video}: video of annotation {anno.path} is missing")
  limit = anno.frame_count
  wanted = sample_indices(limit, anno.fps, config.fps)
  size = target_size(anno.width, anno.height, config.short_side)
  jpegs, decoded = decode_frames(video, wanted, limit, size, config.jpeg_quality)
  if decoded == 0:
    raise VideoError(
      f"{video}: no frame could be decoded (annotation {anno.path} declares {anno.frame_count})"
    )
  if decoded < anno.frame_count:
    logging.warning(
      "%s: decoded %d frames, annotation declares %d; using %d",
      video,
      decoded,
      anno.frame_count,
      decoded,
    )
  num_frames = decoded
  idx = wanted[wanted < num_frames]
  assert len(idx) == len(jpegs), (len(idx), len(jpegs))

  k = len(anno.categories)
  n = min(anno.num_annotated_frames, num_frames)
  native_boxes = anno.boxes[:n].astype(np.float32)
  native_present = anno.present[:n]
  boxes = np.zeros((len(idx), k, 4), np.float32)
  present = np.zeros((len(idx), k), bool)
  generated = np.zeros((len(idx), k), bool)
  inside = idx < n
  boxes[inside] = native_boxes[idx[inside]]
  present[inside] = native_present[idx[inside]]
  generated[inside] = anno.generated[idx[inside]]

  keep = anno.begin_fid < n
  if not keep.all():
    logging.warning(
      "%s: dropped %d relation(s) starting at or after frame %d", anno.path, int((~keep).sum()), n
    )
  begin_fid = anno.begin_fid[keep]
  end_fid = np.minimum(anno.end_fid[keep], n)
  rel_preds = [p for p, kp in zip(anno.predicates, keep) if kp]
  return {
    "video_id": anno.video_id,
    "video_path": video_path,
    "fps": np.float64(anno.fps),
    "frame_count": np.int32(anno.frame_count),
    "num_frames": np.int32(num_frames),
    "num_annotated_frames": np.int32(anno.num_annotated_frames),
    "width": np.int32(anno.width),
    "height": np.int32(anno.height),
    "frames": jpegs,
    "frame_indices": idx.astype(np.int32),
    "tracks": {
      "tid": anno.tids.astype(np.int32),
      "category": np.array([category_index[c] for c in anno.categories], np.int32),
      "boxes": boxes,
      "present": present,
      "generated": generated,
      "native_boxes": native_boxes,
      "native_present": native_present,
    },
    "relations": {
      "subject": anno.subject[keep].astype(np.int32),
      "object": anno.object[keep].astype(np.int32),
      "subject_tid": anno.tids[anno.subject[keep]].astype(np.int32),
      "object_tid": anno.tids[anno.object[keep]].astype(np.int32),
      "predicate": np.array([predicate_index[p] for p in rel_preds], np.int32),
      "begin_fid": begin_fid.astype(np.int32),
      "end_fid": end_fid.astype(np.int32),
      "begin": np.searchsorted(idx, begin_fid).astype(np.int32),
      "end": np.searchsorted(idx, end_fid).astype(np.int32),
    },
  }


def frames_array(example: dict) -> np.ndarray:
  """[T, h, w, 3] uint8 frames of a decoded example (data_source gives a list)."""
  frames = example["frames"]
  if isinstance(frames, np.ndarray):
    return frames
  return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)


def missing_layout_error(
  manual_dir: epath.Path, expected: list[str], instructions: str
) -> FileNotFoundError:
  """The error raised when no split folder exists in manual_dir."""
  return FileNotFoundError(
    f"{manual_dir}: none of the expected folders exist: {', '.join(expected)}.\n{instructions}"
  )


# Track / relation features a training clip reads; the per-native-frame
# arrays (`native_boxes`, `native_present`) and `generated` are skipped.
_CLIP_TRACK_KEYS = ("tid", "category", "boxes", "present")


class ClipSource:
  """Random-access training source whose frames stay encoded until used.

  `source[i]` is the example of `features` with every field the training clip
  needs decoded, except `frames`: a list of T JPEG `bytes` (one per sampled
  frame). A clip decodes only the frames it keeps (`decode_frame`), instead
  of all T frames of the video (TFDS' `as_data_source` decodes every frame).
  Picklable, so grain worker processes can open it.

  Args:
    builder: a prepared `vidor` / `vidvrd` builder.
    split: the split name.
  """

  def __init__(self, builder, split: str):
    self._features = builder.info.features
    self._raw = builder.as_data_source(
      split, deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES
    )

  def __len__(self) -> int:
    return len(self._raw)

  def __getitem__(self, index: int) -> dict:
    f = self._features
    raw = f._example_parser_np.parse_example(self._raw[index])  # pylint: disable=protected-access
    out = {}
    for key, value in raw.items():
      if key == "frames":
        out[key] = list(value)
      elif key == "tracks":
        out[key] = {k: f[key][k].decode_example_np(value[k]) for k in _CLIP_TRACK_KEYS}
      else:
        out[key] = f[key].decode_example_np(value)
    return out


def decode_frame(frame) -> np.ndarray:
  """One stored frame -> `[h, w, 3]` uint8 RGB (a JPEG `bytes` or an array).

  Decodes exactly as TFDS' image feature does (OpenCV, BGR -> RGB), so the
  pixels equal those of `as_data_source`.
  """
  if isinstance(frame, np.ndarray):
    return frame
  img = cv2.imdecode(np.frombuffer(frame, np.uint8), cv2.IMREAD_COLOR)
  if img is None:
    raise VideoError("stored frame is not a decodable JPEG")
  return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
