"""Reading, validating and expanding the official VisualCOMET files.

On-disk layout (the `manual_dir` of the `visualcomet` builder, as the official
downloads unpack):

  {train,val,test}_annots.json   lists of event records
  vcr1images/<img_fn>            VCR images
  vcr1images/<metadata_fn>       VCR metadata JSON: names, boxes (x1, y1, x2,
                                 y2, score), segms, width, height
  features/<image id>.pkl        optional released features, image id = base
                                 name of img_fn without extension:
                                 {"image_features": (2048,),
                                  "object_features": (N, 2048)}

Everything here is plain Python/numpy so it can be used without TFDS. Bad
input raises `DataError` naming the file, the record (or detection) index
and the field.
"""

import json
import os
from typing import Any, Optional

import numpy as np

from relations.commonsense.text import person_tags
from relations.commonsense.text import safe_pickle

RELATIONS = ('intent', 'before', 'after')
FEATURE_DIM = 2048
IMAGES_DIR = 'vcr1images'
FEATURES_DIR = 'features'


class DataError(ValueError):
  """Malformed VisualCOMET / VCR input (message names file, record, field)."""


def _where(path: str, index: Optional[int], field: str) -> str:
  rec = '' if index is None else f' record {index}:'
  return f'{path}:{rec} field {field!r}:'


# ------------------------------------------------------------ annotations
_STR_FIELDS = ('img_fn', 'metadata_fn', 'place', 'event')


def load_annotations(path: str) -> list[dict[str, Any]]:
  """Loads and validates a `*_annots.json` list.

  Args:
    path: the JSON file.

  Returns:
    The list of records (dicts), unchanged.

  Raises:
    FileNotFoundError: missing file.
    DataError: not a list of objects, a required string field (img_fn,
      metadata_fn, place, event) missing or not a string, `movie`/`split` not
      a string, a relation not a list of strings, or an event/inference the
      person-tag mapping cannot convert.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'Annotation file not found: {path}')
  with open(path) as f:
    try:
      records = json.load(f)
    except json.JSONDecodeError as e:
      raise DataError(f'{path}: invalid JSON: {e}') from e
  if not isinstance(records, list):
    raise DataError(f'{path}: expected a JSON list of event records, got {type(records).__name__}')
  for i, rec in enumerate(records):
    validate_record(rec, path, i)
  return records


def validate_record(rec: Any, path: str, i: int) -> None:
  """Checks one annotation record (see `load_annotations`)."""
  if not isinstance(rec, dict):
    raise DataError(f'{path}: record {i}: expected an object, got {type(rec).__name__}')
  for field in _STR_FIELDS:
    if field not in rec:
      raise DataError(f'{_where(path, i, field)} missing')
    if not isinstance(rec[field], str):
      raise DataError(
        f'{_where(path, i, field)} expected a string, got {type(rec[field]).__name__}'
      )
  for field in ('movie', 'split'):
    if field in rec and not isinstance(rec[field], str):
      raise DataError(
        f'{_where(path, i, field)} expected a string, got {type(rec[field]).__name__}'
      )
  texts = [('event', rec['event'])]
  for rel in RELATIONS:
    if rel not in rec:
      continue
    val = rec[rel]
    if not isinstance(val, list):
      raise DataError(
        f'{_where(path, i, rel)} expected a list of strings, got {type(val).__name__}'
      )
    for k, s in enumerate(val):
      if not isinstance(s, str):
        raise DataError(
          f'{_where(path, i, f"{rel}[{k}]")} expected a string, got {type(s).__name__}'
        )
      texts.append((f'{rel}[{k}]', s))
  for field, s in texts:
    try:
      person_tags.map_numbers_to_det_tokens(s)
    except ValueError as e:
      raise DataError(f'{_where(path, i, field)} cannot map person tags in {s!r}: {e}') from e


# --------------------------------------------------------------- metadata
def load_metadata(path: str) -> dict[str, Any]:
  """Loads and validates one VCR metadata JSON.

  Returns:
    dict with names (list[str]), boxes float32 [N, 4] (x1, y1, x2, y2 pixels,
    x2/y2 clipped to width/height as the official loader does), scores
    float32 [N], segms (list, unchanged; unused by the model), width, height.

  Raises:
    FileNotFoundError / DataError naming the file, detection index and field.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'VCR metadata not found: {path}')
  with open(path) as f:
    try:
      meta = json.load(f)
    except json.JSONDecodeError as e:
      raise DataError(f'{path}: invalid JSON: {e}') from e
  if not isinstance(meta, dict):
    raise DataError(f'{path}: expected a JSON object')
  for field in ('names', 'boxes', 'segms', 'width', 'height'):
    if field not in meta:
      raise DataError(f'{_where(path, None, field)} missing')
  w, h = meta['width'], meta['height']
  for field, v in (('width', w), ('height', h)):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
      raise DataError(f'{_where(path, None, field)} expected a positive number, got {v!r}')
  names, boxes, segms = meta['names'], meta['boxes'], meta['segms']
  for field, v in (('names', names), ('boxes', boxes), ('segms', segms)):
    if not isinstance(v, list):
      raise DataError(f'{_where(path, None, field)} expected a list')
  if not len(names) == len(boxes) == len(segms):
    raise DataError(
      f'{path}: names/boxes/segms lengths differ: {len(names)}/{len(boxes)}/{len(segms)}'
    )
  out = np.zeros((len(boxes), 4), np.float32)
  scores = np.zeros((len(boxes),), np.float32)
  for k, (name, box) in enumerate(zip(names, boxes)):
    if not isinstance(name, str):
      raise DataError(f'{_where(path, None, f"names[{k}]")} expected a string')
    ok = (
      isinstance(box, list)
      and len(box) == 5
      and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in box
      )
    )
    if not ok:
      raise DataError(
        f'{_where(path, None, f"boxes[{k}]")} expected [x1, y1, x2, y2, score], got {box!r}'
      )
    x1, y1, x2, y2, s = box
    # The official loader asserts x1 >= 0, x1 < x2, y1 >= 0, y1 < y2.
    if not (0 <= x1 < x2 and 0 <= y1 < y2):
      raise DataError(
        f'{_where(path, None, f"boxes[{k}]")} invalid box {box!r} (need 0 <= x1 < x2, 0 <= y1 < y2)'
      )
    out[k] = (x1, y1, min(x2, w), min(y2, h))
    scores[k] = s
  return dict(names=list(names), boxes=out, scores=scores, segms=segms, width=int(w), height=int(h))


# --------------------------------------------------------------- features
def image_id(img_fn: str) -> str:
  """Feature file stem: base name of img_fn without extension (official)."""
  return img_fn[img_fn.rfind('/') + 1 : img_fn.rfind('.')]


def load_features(path: str, num_boxes: int) -> dict[str, np.ndarray]:
  """Loads one released feature pickle through the restricted unpickler.

  Args:
    path: `<features dir>/<image id>.pkl`.
    num_boxes: detections in the image's metadata (rows expected).

  Returns:
    image_features float32 [2048], object_features float32 [N, 2048].

  Raises:
    FileNotFoundError, safe_pickle.UnsafePickleError, DataError.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'Feature file not found: {path}')
  obj = safe_pickle.load(path)
  if not isinstance(obj, dict):
    raise DataError(f'{path}: expected a dict, got {type(obj).__name__}')
  out = {}
  for field, shape in (
    ('image_features', (FEATURE_DIM,)),
    ('object_features', (num_boxes, FEATURE_DIM)),
  ):
    if field not in obj:
      raise DataError(f'{_where(path, None, field)} missing')
    arr = np.asarray(obj[field])
    if arr.shape != shape or not np.issubdtype(arr.dtype, np.floating):
      raise DataError(
        f'{_where(path, None, field)} expected float {shape}, got {arr.dtype} {arr.shape}'
      )
    out[field] = arr.astype(np.float32)
  return out


# ------------------------------------------------------------- expansions
def expand_record(record: dict[str, Any], event_idx: int, expansion: str) -> list[dict[str, Any]]:
  """Official expansion of one record, in official order.

  Args:
    record: one annotation record of a split (validated).
    event_idx: its position in the split.
    expansion: 'training' (one item per ground-truth inference; relations intent, before,
      after), 'generation' (one per event x relation, all three), or 'ranking' (training-style,
      as `run_rank.py` reads val).

  Returns:
    dicts with the record fields plus `event_idx`, `inference_relation`, `event_name`,
    `person2name`, `name2person`, and `inference_text`/`inference_text_name` (str for
    training/ranking; list or absent for generation).
  """
  if expansion not in ('training', 'generation', 'ranking'):
    raise ValueError(f'unknown expansion {expansion!r}')
  if expansion == 'generation':
    return person_tags.encode_generation_record(record, event_idx)
  return person_tags.encode_finetune_record(record, event_idx)


def rank_key(item: dict[str, Any]) -> str:
  """The official rank grouping key: img_fn + '_' + event + '_' + relation."""
  return item['img_fn'] + '_' + item['event'] + '_' + item['inference_relation']


# ------------------------------------------------------------ image table
def unique_images(records: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
  """The split's images, each once, in order of first appearance.

  Row r of this list is row r of the split's image table (the `images` /
  `images_features` configs of the builder); every example stores the row of
  its image as `image_index`.

  Args:
    records: annotation records of one split (validated).

  Returns:
    [(first record index, img_fn, metadata_fn)].
  """
  seen = {}
  for i, rec in enumerate(records):
    if rec['img_fn'] not in seen:
      seen[rec['img_fn']] = (i, rec['img_fn'], rec['metadata_fn'])
  return list(seen.values())
