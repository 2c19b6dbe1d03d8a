"""Parse and validate official VidOR / ImageNet-VidVRD annotation JSON files.

One annotation file describes one video:

  VidOR   `annotation/{training,validation}/<group>/<video_id>.json`,
          with `"version": "VERSION 1.0"`, `video_hash`, `video_path`.
  VidVRD  `{train,test}/<video_id>.json`, without `version`.

`read_annotation(path)` turns one file into a `VideoAnnotation` of plain numpy
arrays (what the TFDS builders store) after validating every field; any
problem raises `AnnotationError` naming the file, the record and the field.

`load_groundtruth(path)` builds the ground truth the official scorer takes,
exactly as `dataset.Dataset.get_relation_insts` of xdshang/VidVRD-helper
(what `python -m dataset.vidor validation relation gt.json` writes):

  {video_id (str): [
      {"triplet": (subject_category, predicate, object_category),  # 3 str
       "subject_tid": int,
       "object_tid": int,
       "duration": (begin_fid, end_fid),       # 2 int, end exclusive
       "sub_traj": [(xmin, ymin, xmax, ymax), ...],
       "obj_traj": [(xmin, ymin, xmax, ymax), ...]},
      ...],                                    # annotation order
   ...}

  - Boxes are tuples of the numbers as written in the JSON (int stays int),
    "[left, top, right, bottom] (all inclusive)", native pixels.
  - `sub_traj` is `[boxes[tid] for boxes in trajectories[begin:end]]`, no
    interpolation. As in the official code, a relation whose `end_fid` lies
    beyond the last annotated frame gets fewer than `end - begin` boxes (the
    scorer computes volumes over `len(traj)`). A frame inside the duration
    without a box for the tid is an error (the official code raises
    KeyError); the message names the file, relation index, frame and tid.
  - Videos with no relation instances map to an empty list (the scorer skips
    them).
  - `path` may be a folder (every `*.json` below it, recursively, is one
    video: pass `annotation/validation` for VidOR or `test` for VidVRD), one
    annotation file, or one JSON already in the format above (lists are
    turned into tuples).

Known data faults and what is done about them (VidVRD-helper PR #3):
  - `frame_count` larger than `len(trajectories)`: the trailing frames are
    unannotated (no boxes); `num_annotated_frames` keeps the list length.
  - `relation_instances[i].end_fid > len(trajectories)`: kept as written here
    (official behaviour above); the builders clip it to the annotated frames.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from relations.video_relations.data import categories as vrd_categories

if TYPE_CHECKING:
  from etils import epath

Box = tuple[Any, Any, Any, Any]
GroundTruth = dict[str, list[dict[str, Any]]]

VIDOR_VERSION = "VERSION 1.0"
_BOX_KEYS = ("xmin", "ymin", "xmax", "ymax")


class AnnotationError(ValueError):
  """An annotation file or record is malformed; the message says where."""


@dataclasses.dataclass(frozen=True)
class VideoAnnotation:
  """One video's annotation as numpy arrays.

  K objects (trajectories) in `subject/objects` order, N annotated frames
  (`len(trajectories)`), R relation instances in annotation order.

  Attributes:
    path: the JSON file it was read from.
    video_id: `video_id` field.
    version: `version` field (VidOR) or None (VidVRD).
    video_path: VidOR `video_path` (`<group>/<id>.mp4`) or None.
    frame_count: declared number of native frames.
    fps: native frames per second.
    width: native frame width in pixels.
    height: native frame height in pixels.
    tids: [K] int64 track ids.
    categories: K category names.
    boxes: [N, K, 4] float64 (xmin, ymin, xmax, ymax) native pixels, inclusive
      corners as annotated; 0 where `present` is False.
    present: [N, K] bool, the object has a box in that frame.
    generated: [N, K] bool, the box was produced by a tracker (`generated: 1`).
    subject: [R] int64 index into the K objects of each relation's subject.
    object: [R] int64 index of each relation's object.
    predicates: R predicate names.
    begin_fid: [R] int64 first native frame (inclusive).
    end_fid: [R] int64 end native frame (exclusive).
  """

  path: str
  video_id: str
  version: str | None
  video_path: str | None
  frame_count: int
  fps: float
  width: int
  height: int
  tids: np.ndarray
  categories: tuple[str, ...]
  boxes: np.ndarray
  present: np.ndarray
  generated: np.ndarray
  subject: np.ndarray
  object: np.ndarray
  predicates: tuple[str, ...]
  begin_fid: np.ndarray
  end_fid: np.ndarray

  @property
  def num_annotated_frames(self) -> int:
    return int(self.boxes.shape[0])

  @property
  def num_relations(self) -> int:
    return len(self.predicates)


def _path(path: str | epath.Path) -> epath.Path:
  """path as an `epath.Path` (local or gs://). etils is imported here, on first use: the
  evaluator CLI reads local files without it, and its import costs ~0.1 s of start-up."""
  from etils import epath  # pylint: disable=import-outside-toplevel,redefined-outer-name

  return epath.Path(path)


def load_json(path: str | epath.Path) -> Any:
  """Reads a JSON file; malformed JSON raises AnnotationError naming it."""
  path = _path(path)
  try:
    text = path.read_text(encoding="utf-8")
  except FileNotFoundError:
    raise
  except (OSError, UnicodeDecodeError) as e:
    raise AnnotationError(f"{path}: cannot read: {e}") from e
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise AnnotationError(f"{path}: malformed JSON: {e}") from e
  except RecursionError:
    raise AnnotationError(f"{path}: JSON nested too deeply to read") from None
  except ValueError as e:  # an integer literal beyond Python's digit limit
    raise AnnotationError(f"{path}: unreadable JSON value: {e}") from None


def _field(record: dict, key: str, types, where: str):
  if not isinstance(record, dict):
    raise AnnotationError(f"{where}: expected an object, got {type(record).__name__}")
  if key not in record:
    raise AnnotationError(f"{where}: missing field '{key}'")
  value = record[key]
  # bool is an int subclass; a JSON true is never a valid number here.
  if not isinstance(value, types) or isinstance(value, bool):
    names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
    raise AnnotationError(f"{where}: field '{key}' must be {names}, got {value!r}")
  return value


def _int64(record: dict, key: str, where: str) -> int:
  """An integer field stored in an int64 array (tids, frame indices)."""
  value = _field(record, key, int, where)
  if not -(2**63) <= value < 2**63:
    raise AnnotationError(f"{where}: field '{key}' is out of the int64 range: {value}")
  return value


def _number(record: dict, key: str, where: str) -> float:
  value = _field(record, key, (int, float), where)
  if not math.isfinite(value):
    raise AnnotationError(f"{where}: field '{key}' is not finite: {value!r}")
  return value


def parse_annotation(
  raw: Any,
  path: str = "<memory>",
  dataset: str | None = None,
  categories: Iterable[str] | None = None,
  predicates: Iterable[str] | None = None,
) -> VideoAnnotation:
  """Validates one decoded annotation and converts it to numpy arrays.

  Args:
    raw: the decoded JSON object.
    path: file name used in error messages.
    dataset: "vidor" requires `version == "VERSION 1.0"`, "vidvrd" requires no
      `version` field (both as the official loaders assert); None checks
      neither.
    categories: if given, every object category must be one of these.
    predicates: if given, every predicate must be one of these.

  Returns:
    The VideoAnnotation.

  Raises:
    AnnotationError: naming `path`, the record and the field.
  """
  where = str(path)
  if not isinstance(raw, dict):
    raise AnnotationError(f"{where}: top level must be an object, got {type(raw).__name__}")
  version = raw.get("version")
  if dataset == "vidor" and version != VIDOR_VERSION:
    raise AnnotationError(
      f"{where}: field 'version' must be {VIDOR_VERSION!r} for VidOR, got {version!r}"
    )
  if dataset == "vidvrd" and "version" in raw:
    raise AnnotationError(
      f"{where}: ImageNet-VidVRD annotations have no 'version' field, got {version!r}"
    )
  video_id = _field(raw, "video_id", str, where)
  frame_count = _field(raw, "frame_count", int, where)
  fps = _number(raw, "fps", where)
  width = _field(raw, "width", int, where)
  height = _field(raw, "height", int, where)
  if frame_count < 0 or fps <= 0 or width <= 0 or height <= 0:
    raise AnnotationError(
      f"{where}: need frame_count >= 0 and positive fps/width/height, got "
      f"frame_count={frame_count} fps={fps} width={width} height={height}"
    )
  video_path = raw.get("video_path")
  if video_path is not None and not isinstance(video_path, str):
    raise AnnotationError(f"{where}: field 'video_path' must be str")

  # Objects.
  objs = _field(raw, "subject/objects", list, where)
  category_set = None if categories is None else set(categories)
  tid_index: dict[int, int] = {}
  cats = []
  for i, obj in enumerate(objs):
    w = f"{where}: subject/objects[{i}]"
    tid = _int64(obj, "tid", w)
    cat = _field(obj, "category", str, w)
    if tid in tid_index:
      raise AnnotationError(f"{w}: duplicate tid {tid}")
    if category_set is not None and cat not in category_set:
      raise AnnotationError(f"{w}: field 'category' {cat!r} is not a known category (tid {tid})")
    tid_index[tid] = i
    cats.append(cat)
  k = len(cats)

  # Trajectories: one list of boxes per annotated frame.
  trajs = _field(raw, "trajectories", list, where)
  n = len(trajs)
  boxes = np.zeros((n, k, 4), np.float64)
  present = np.zeros((n, k), bool)
  generated = np.zeros((n, k), bool)
  for f, frame in enumerate(trajs):
    if not isinstance(frame, list):
      raise AnnotationError(f"{where}: trajectories[{f}] must be a list")
    for j, roi in enumerate(frame):
      w = f"{where}: trajectories[{f}][{j}]"
      tid = _field(roi, "tid", int, w)
      if tid not in tid_index:
        raise AnnotationError(f"{w}: tid {tid} is not in subject/objects")
      col = tid_index[tid]
      if present[f, col]:
        raise AnnotationError(f"{w}: second box for tid {tid} in frame {f}")
      bbox = _field(roi, "bbox", dict, w)
      box = [_number(bbox, key, f"{w}.bbox") for key in _BOX_KEYS]
      if box[0] > box[2] or box[1] > box[3]:
        raise AnnotationError(f"{w}.bbox: inverted box {box} (tid {tid})")
      boxes[f, col] = box
      present[f, col] = True
      gen = roi.get("generated", 0)
      if gen not in (0, 1) or isinstance(gen, float):
        raise AnnotationError(f"{w}: field 'generated' must be 0 or 1, got {gen!r}")
      generated[f, col] = bool(gen)

  # Relation instances.
  rels = _field(raw, "relation_instances", list, where)
  predicate_set = None if predicates is None else set(predicates)
  subj, obj_, preds, begin, end = [], [], [], [], []
  for i, rel in enumerate(rels):
    w = f"{where}: relation_instances[{i}]"
    s = _field(rel, "subject_tid", int, w)
    o = _field(rel, "object_tid", int, w)
    p = _field(rel, "predicate", str, w)
    b = _int64(rel, "begin_fid", w)
    e = _int64(rel, "end_fid", w)
    for key, tid in (("subject_tid", s), ("object_tid", o)):
      if tid not in tid_index:
        raise AnnotationError(f"{w}: field '{key}' {tid} is not in subject/objects")
    if predicate_set is not None and p not in predicate_set:
      raise AnnotationError(f"{w}: field 'predicate' {p!r} is not a known predicate")
    if not 0 <= b < e:
      raise AnnotationError(f"{w}: need 0 <= begin_fid < end_fid, got begin_fid={b} end_fid={e}")
    subj.append(tid_index[s])
    obj_.append(tid_index[o])
    preds.append(p)
    begin.append(b)
    end.append(e)

  return VideoAnnotation(
    path=where,
    video_id=video_id,
    version=version,
    video_path=video_path,
    frame_count=frame_count,
    fps=float(fps),
    width=width,
    height=height,
    tids=np.array(list(tid_index), np.int64).reshape(k),
    categories=tuple(cats),
    boxes=boxes,
    present=present,
    generated=generated,
    subject=np.array(subj, np.int64),
    object=np.array(obj_, np.int64),
    predicates=tuple(preds),
    begin_fid=np.array(begin, np.int64),
    end_fid=np.array(end, np.int64),
  )


def read_annotation(
  path: str | epath.Path, dataset: str | None = None, **kwargs
) -> VideoAnnotation:
  """Reads and validates one annotation file (see `parse_annotation`)."""
  return parse_annotation(load_json(path), str(path), dataset=dataset, **kwargs)


def groundtruth_instances(raw: dict, path: str = "<memory>") -> list[dict[str, Any]]:
  """Official ground-truth relation instances of one decoded annotation.

  Same result as VidVRD-helper `Dataset.get_relation_insts(vid)`; call
  `parse_annotation` first to validate `raw`.

  Args:
    raw: the decoded annotation JSON of one video.
    path: file name for error messages.

  Returns:
    A list of instance dicts in the format of the module docstring.

  Raises:
    AnnotationError: a frame of a relation's duration lacks the box.
  """
  category = {o["tid"]: o["category"] for o in raw["subject/objects"]}
  trajs = [
    {roi["tid"]: tuple(roi["bbox"][key] for key in _BOX_KEYS) for roi in frame}
    for frame in raw["trajectories"]
  ]
  out = []
  for i, rel in enumerate(raw["relation_instances"]):
    s, o = rel["subject_tid"], rel["object_tid"]
    b, e = rel["begin_fid"], rel["end_fid"]
    sub_traj, obj_traj = [], []
    for f, frame in enumerate(trajs[b:e], start=b):
      for tid, traj in ((s, sub_traj), (o, obj_traj)):
        if tid not in frame:
          raise AnnotationError(
            f"{path}: relation_instances[{i}]: frame {f} of duration "
            f"[{b}, {e}) has no box for tid {tid}"
          )
        traj.append(frame[tid])
    out.append(
      {
        "triplet": (category[s], rel["predicate"], category[o]),
        "subject_tid": s,
        "object_tid": o,
        "duration": (b, e),
        "sub_traj": sub_traj,
        "obj_traj": obj_traj,
      }
    )
  return out


_ANNOTATION_KEYS = frozenset(
  ("trajectories", "subject/objects", "relation_instances", "video_id", "frame_count")
)


def _groundtruth_from_json(data: Any, path: str, dataset: str | None = None) -> GroundTruth:
  """Validates a consolidated ground-truth JSON and converts lists to tuples.

  With `dataset`, every subject / object category and predicate must be one of its names.
  """
  if not isinstance(data, dict):
    raise AnnotationError(f"{path}: ground truth must map video ids to lists")
  known = None
  if dataset is not None:
    objects = set(vrd_categories.object_categories(dataset))
    known = (objects, set(vrd_categories.predicates(dataset)), objects)
  out: GroundTruth = {}
  for vid, insts in data.items():
    if not isinstance(insts, list):
      raise AnnotationError(f"{path}: video {vid}: expected a list")
    conv = []
    for i, inst in enumerate(insts):
      w = f"{path}: video {vid}[{i}]"
      triplet = _field(inst, "triplet", list, w)
      duration = _field(inst, "duration", list, w)
      if len(triplet) != 3 or not all(isinstance(t, str) for t in triplet):
        raise AnnotationError(f"{w}: field 'triplet' must be 3 strings")
      if known is not None:
        for name, pool, what in zip(
          triplet, known, ("subject category", "predicate", "object category")
        ):
          if name not in pool:
            raise AnnotationError(f"{w}: field 'triplet': {name!r} is not a known {dataset} {what}")
      if len(duration) != 2 or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in duration
      ):
        raise AnnotationError(f"{w}: field 'duration' must be 2 ints")
      trajs = {}
      for key in ("sub_traj", "obj_traj"):
        traj = _field(inst, key, list, w)
        for j, box in enumerate(traj):
          if (
            not isinstance(box, list)
            or len(box) != 4
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in box)
          ):
            raise AnnotationError(f"{w}: field '{key}'[{j}] must be 4 numbers")
        trajs[key] = [tuple(box) for box in traj]
      conv.append(
        {
          "triplet": tuple(triplet),
          "subject_tid": _field(inst, "subject_tid", int, w),
          "object_tid": _field(inst, "object_tid", int, w),
          "duration": tuple(duration),
          **trajs,
        }
      )
    out[vid] = conv
  return out


def _json_files(folder: epath.Path) -> list[epath.Path]:
  """Every *.json below `folder` (epath's gpath backend has no rglob)."""
  out = []
  for child in folder.iterdir():
    if child.is_dir():
      out += _json_files(child)
    elif child.name.endswith(".json"):
      out.append(child)
  return out


def load_groundtruth(path: str | epath.Path, dataset: str | None = None) -> GroundTruth:
  """Official ground truth from an annotation folder, file or GT JSON.

  Args:
    path: a folder of annotation files (searched recursively), one annotation
      file, or one consolidated ground-truth JSON.
    dataset: passed to `parse_annotation` ("vidor", "vidvrd" or None).

  Returns:
    {video_id: [instance, ...]} in the format of the module docstring, videos
    in sorted file order.

  Raises:
    AnnotationError: malformed content, or two files with one video_id.
    FileNotFoundError: `path` does not exist or a folder holds no JSON.
  """
  path = _path(path)
  if not path.exists():
    raise FileNotFoundError(f"{path}: no such file or folder")
  if path.is_dir():
    files = sorted(_json_files(path))
    if not files:
      raise FileNotFoundError(f"{path}: no *.json annotation files below it")
  else:
    data = load_json(path)
    # One annotation file has these keys; a consolidated GT JSON maps video ids to lists. An
    # annotation file missing `trajectories` must be reported as such, not read as GT JSON.
    if not (isinstance(data, dict) and _ANNOTATION_KEYS & data.keys()):
      return _groundtruth_from_json(data, str(path), dataset)
    files = [path]
  names = {}
  if dataset is not None:
    names = {
      "categories": vrd_categories.object_categories(dataset),
      "predicates": vrd_categories.predicates(dataset),
    }
  out: GroundTruth = {}
  source: dict[str, str] = {}
  for f in files:
    raw = load_json(f)
    anno = parse_annotation(raw, str(f), dataset=dataset, **names)
    if anno.video_id in out:
      raise AnnotationError(f"{f}: video_id {anno.video_id} also in {source[anno.video_id]}")
    source[anno.video_id] = str(f)
    out[anno.video_id] = groundtruth_instances(raw, str(f))
  return out
