"""One official annotation file (VidOR / ImageNet-VidVRD) straight into arrays.

`json.load` of an annotation file builds a dict per box of every frame (VidOR validation: ~300 MB
of them), and the checks and the ground-truth conversion then walk them in Python: ~50 ms per
video, most of a VidOR evaluation's time when the ground truth is the official folder.
`scan(data)` reads a plain file with one compiled pass (`json_scan`'s tokens and numbers, the
values `json.loads` gives) into the fields the ground truth needs; `groundtruth_table(path)`
checks them as `annotations.parse_annotation` does and builds the video's `RelationTable`, equal
to `RelationTable.from_dicts` of `annotations.load_groundtruth(path)`.

Anything not plain - a missing, repeated or mistyped field, a bool or a float where an integer
is wanted, a non-finite or out-of-range number, an escaped key, a repeated tid, a box or a
category the checks refuse, invalid JSON - returns None, and the caller reads that file with
`annotations.load_groundtruth`, whose messages (or result) stand.
"""

from __future__ import annotations

import json

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import json_scan

_ws = json_scan._ws  # pylint: disable=protected-access
_string_end = json_scan._string_end  # pylint: disable=protected-access
_fast_number = json_scan._fast_number  # pylint: disable=protected-access
_skip = json_scan._skip  # pylint: disable=protected-access
_after_item = json_scan._after_item  # pylint: disable=protected-access
_INT = json_scan._INT  # pylint: disable=protected-access
_FLOAT = json_scan._FLOAT  # pylint: disable=protected-access

OK, NOT_PLAIN = 0, 1

# Keys, by level. Root: 0 version .. 9 relation_instances; then the members of an object, a box
# entry, a bbox and a relation instance.
_WORDS = (
  b"version",
  b"video_id",
  b"frame_count",
  b"fps",
  b"width",
  b"height",
  b"video_path",
  b"subject/objects",
  b"trajectories",
  b"relation_instances",
  b"tid",  # 10: subject/objects[i]
  b"category",
  b"tid",  # 12: trajectories[f][j]
  b"bbox",
  b"generated",
  b"xmin",  # 15: bbox
  b"ymin",
  b"xmax",
  b"ymax",
  b"subject_tid",  # 19: relation_instances[i]
  b"object_tid",
  b"predicate",
  b"begin_fid",
  b"end_fid",
)
_LEX = np.frombuffer(b"".join(_WORDS), np.uint8)
_AT = np.array([sum(map(len, _WORDS[:k])) for k in range(len(_WORDS))], np.int64)
_LEN = np.array([len(w) for w in _WORDS], np.int64)
_ROOT, _OBJ, _ROI, _BOX, _REL = 0, 10, 12, 15, 19
(K_VERSION, K_VIDEO_ID, K_FRAME_COUNT, K_FPS, K_WIDTH, K_HEIGHT, K_VIDEO_PATH) = range(7)
K_OBJECTS, K_TRAJECTORIES, K_RELATIONS = 7, 8, 9
_REQUIRED = sum(1 << k for k in (1, 2, 3, 4, 5, 7, 8, 9))  # all but version and video_path


@numba.njit(cache=True, nogil=True, _nrt=False)
def _key(buf, i, first, last):
  """A member's key at i among keys first..last-1: (key - first or -1 unknown, index after ':'
  and whitespace); (-2, -1) if it is not plain (invalid, or escaped)."""
  n = len(buf)
  if i >= n or buf[i] != 34:
    return -2, -1
  e = _string_end(buf, i)
  if e < 0:
    return -2, -1
  for k in range(i + 1, e - 1):
    if buf[k] == 92:
      return -2, -1
  found = -1
  for key in range(first, last):
    length = _LEN[key]
    if e - i - 2 != length:
      continue
    same = True
    for k in range(length):
      if buf[i + 1 + k] != _LEX[_AT[key] + k]:
        same = False
        break
    if same:
      found = key - first
      break
  j = _ws(buf, e)
  if j >= n or buf[j] != 58:
    return -2, -1
  return found, _ws(buf, j + 1)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _int(buf, i):
  """An integer token of <= 15 digits at i: (value, end); end -1 otherwise."""
  v, kind, e = _fast_number(buf, i)
  if kind != _INT:
    return 0, -1
  return np.int64(v), e


@numba.njit(cache=True, nogil=True, _nrt=False)
def _finite(buf, i):
  """A finite number token at i (<= 15 digits if an integer): (value, end); end -1 otherwise."""
  v, kind, e = _fast_number(buf, i)
  if (kind != _INT and kind != _FLOAT) or not np.isfinite(v):
    return 0.0, -1
  return v, e


@numba.njit(cache=True, nogil=True, _nrt=False)
def _open(buf, i, c):
  """buf[i] is c ('[' or '{'): (index of the first item, 1) or (after the close, 0) if empty;
  (-1, 0) if buf[i] is not c."""
  n = len(buf)
  if i >= n or buf[i] != c:
    return -1, 0
  j = _ws(buf, i + 1)
  if j < n and buf[j] == c + 2:  # ']' / '}'
    return j + 1, 0
  return j, 1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _member(buf, j, first, last, got):
  """The next member of an object at j, keys first..last-1: (key - first or -1 unknown, index of
  its value, `got` with the key's bit); key -2 if not plain (also a key seen before: json.loads
  keeps the last, the dict reader says what that means)."""
  k, j = _key(buf, j, first, last)
  if k == -2 or (k >= 0 and got & (1 << k)):
    return -2, -1, got
  return k, j, (got | (1 << k)) if k >= 0 else got


@numba.njit(cache=True, nogil=True, _nrt=False)
def _string(buf, j, span):
  """A string token at j: its span into span[0:2]; the index after it, -1 if none."""
  if j >= len(buf) or buf[j] != 34:
    return -1
  span[0] = j
  span[1] = _string_end(buf, j)
  return span[1]


@numba.njit(cache=True, nogil=True)
def _other(buf, j):
  """Validates and skips an unread value: the index after it, -1 if invalid."""
  e, status, _ = _skip(buf, j)
  return -1 if status else e


@numba.njit(cache=True, nogil=True, _nrt=False)
def _bbox(buf, j, boxes, row):
  """A bbox object at j into boxes[row] (finite xmin, ymin, xmax, ymax, not inverted): the
  index after it, -1 if not plain."""
  j, more = _open(buf, j, 123)
  got = 0
  while more:
    k, j, got = _member(buf, j, _BOX, _REL, got)
    if k == -2:
      return -1
    if k >= 0:
      boxes[row, k], j = _finite(buf, j)
    else:
      j = _other(buf, j)
    if j < 0:
      return -1
    j, more = _after_item(buf, j, 125)
  if j < 0 or got != 15 or boxes[row, 0] > boxes[row, 2] or boxes[row, 1] > boxes[row, 3]:
    return -1
  return j


@numba.njit(cache=True, nogil=True)
def scan(
  buf, ints, fps, spans, obj_tid, obj_cat, roi_frame, roi_tid, roi_box, rel, rel_pred, counts
):
  """Scans one annotation file.

  Args:
    buf: uint8 [n], the whole file.
    ints: int64 [3] (out) frame_count, width, height; fps: float64 [1] (out).
    spans: int64 [3, 2] (out) token spans (with quotes) of version, video_id, video_path; (-1, -1)
      where absent (video_path: also null).
    obj_tid, obj_cat: (out) [O] tid, [O, 2] category token span, per subject/objects entry.
    roi_frame, roi_tid, roi_box: (out) [B] frame index, tid, [B, 4] xmin, ymin, xmax, ymax.
    rel: (out) [R, 4] subject_tid, object_tid, begin_fid, end_fid; rel_pred [R, 2] token span.
    counts: (out) [4] objects, frames, boxes, relations.

  Returns:
    OK, or NOT_PLAIN (see the module docstring; also when an output array is full).
  """
  spans[:] = -1
  counts[:] = 0
  no, nf, nb, nr = 0, 0, 0, 0
  i, more = _open(buf, _ws(buf, 0), 123)
  if not more:
    return NOT_PLAIN
  seen = 0
  while more:
    key, i, seen = _member(buf, i, _ROOT, _OBJ, seen)
    if key == -2:
      return NOT_PLAIN
    if key == K_VERSION or key == K_VIDEO_ID:
      e = _string(buf, i, spans[0 if key == K_VERSION else 1])
    elif key == K_VIDEO_PATH:
      e = _string(buf, i, spans[2])
      if e < 0 and i + 4 <= len(buf) and buf[i] == 110:  # null
        e = i + 4 if buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108 else -1
    elif key == K_FRAME_COUNT or key == K_WIDTH or key == K_HEIGHT:
      ints[0 if key == K_FRAME_COUNT else (1 if key == K_WIDTH else 2)], e = _int(buf, i)
    elif key == K_FPS:
      fps[0], e = _finite(buf, i)
    elif key == K_OBJECTS:  # [{"tid": int, "category": str}, ...]
      e, items = _open(buf, i, 91)
      while items:
        if no == len(obj_tid):
          return NOT_PLAIN
        j, members = _open(buf, e, 123)
        got = 0
        while members:
          k, j, got = _member(buf, j, _OBJ, _ROI, got)
          if k == -2:
            return NOT_PLAIN
          if k == 0:
            obj_tid[no], j = _int(buf, j)
          elif k == 1:
            j = _string(buf, j, obj_cat[no])
          else:
            j = _other(buf, j)
          if j < 0:
            return NOT_PLAIN
          j, members = _after_item(buf, j, 125)
        if j < 0 or got != 3:
          return NOT_PLAIN
        no += 1
        e, items = _after_item(buf, j, 93)
    elif key == K_TRAJECTORIES:  # per frame [{"tid": int, "bbox": {...}, "generated": 0/1}, ...]
      e, frames = _open(buf, i, 91)
      while frames:
        j, boxes = _open(buf, e, 91)
        while boxes:
          if nb == len(roi_tid):
            return NOT_PLAIN
          j, members = _open(buf, j, 123)
          got = 0
          while members:
            k, j, got = _member(buf, j, _ROI, _BOX, got)
            if k == -2:
              return NOT_PLAIN
            if k == 0:
              roi_tid[nb], j = _int(buf, j)
            elif k == 1:
              j = _bbox(buf, j, roi_box, nb)
            elif k == 2:  # the integer 0 or 1 (anything else: the dict reader)
              g, j = _int(buf, j)
              j = j if g == 0 or g == 1 else -1
            else:
              j = _other(buf, j)
            if j < 0:
              return NOT_PLAIN
            j, members = _after_item(buf, j, 125)
          if j < 0 or got & 3 != 3:
            return NOT_PLAIN
          roi_frame[nb] = nf
          nb += 1
          j, boxes = _after_item(buf, j, 93)
        if j < 0:
          return NOT_PLAIN
        nf += 1
        e, frames = _after_item(buf, j, 93)
    elif key == K_RELATIONS:  # [{"subject_tid", "object_tid", "predicate", "begin_fid", ...}]
      e, items = _open(buf, i, 91)
      while items:
        if nr == len(rel):
          return NOT_PLAIN
        j, members = _open(buf, e, 123)
        got = 0
        while members:
          k, j, got = _member(buf, j, _REL, len(_LEN), got)
          if k == -2:
            return NOT_PLAIN
          if k == 2:
            j = _string(buf, j, rel_pred[nr])
          elif k >= 0:
            rel[nr, k if k < 2 else k - 1], j = _int(buf, j)
          else:
            j = _other(buf, j)
          if j < 0:
            return NOT_PLAIN
          j, members = _after_item(buf, j, 125)
        if j < 0 or got != 31 or not 0 <= rel[nr, 2] < rel[nr, 3]:
          return NOT_PLAIN
        nr += 1
        e, items = _after_item(buf, j, 93)
    else:
      e = _other(buf, i)
    if e < 0:
      return NOT_PLAIN
    i, more = _after_item(buf, e, 125)
  if i < 0 or _ws(buf, i) != len(buf) or seen & _REQUIRED != _REQUIRED:
    return NOT_PLAIN
  counts[0], counts[1], counts[2], counts[3] = no, nf, nb, nr
  return OK


@numba.njit(cache=True, nogil=True)
def _relation_boxes(roi_frame, roi_col, roi_box, rel, s_col, o_col, frames, objects):
  """Each relation's boxes in `RelationTable.from_dicts`' layout: its subject's over the frames
  [begin, min(end, frames)) (the official slice of the frame list), then its object's.

  Args: the boxes' frame [B], object column [B] and [B, 4] values; the relations [R, 4]
  (subject_tid, object_tid, begin, end; 0 <= begin < end) and their subject / object columns;
  the number of frames and of objects (columns).

  Returns:
    (ok, boxes [2 T, 4], offset [R, 2], length [R]) with T the relations' frames; ok False
    if an object has two boxes in a frame or a relation's frame lacks one of its boxes.
  """
  where = np.full((frames, objects), -1, np.int64)
  nr = len(rel)
  length = np.zeros(nr, np.int64)
  offset = np.zeros((nr, 2), np.int64)
  for b in range(len(roi_col)):
    if where[roi_frame[b], roi_col[b]] >= 0:
      return False, np.zeros((0, 4)), offset, length
    where[roi_frame[b], roi_col[b]] = b
  total = 0
  for r in range(nr):
    length[r] = max(min(rel[r, 3], frames) - rel[r, 2], 0)
    total += length[r]
  boxes = np.empty((2 * total, 4), np.float64)
  at = 0
  for r in range(nr):
    offset[r, 0], offset[r, 1] = at, at + length[r]
    for side in range(2):
      col = s_col[r] if side == 0 else o_col[r]
      for f in range(rel[r, 2], rel[r, 2] + length[r]):
        b = where[f, col]
        if b < 0:
          return False, np.zeros((0, 4)), offset, length
        for k in range(4):
          boxes[at, k] = roi_box[b, k]
        at += 1
  return True, boxes, offset, length


def _token(data: bytes, span) -> str:
  """The string a token data[s:e] (with quotes) decodes to."""
  raw = data[span[0] + 1 : span[1] - 1]
  return json.loads(data[span[0] : span[1]]) if b"\\" in raw else raw.decode("utf-8")


def groundtruth_table(path: str, dataset: str | None = None):
  """(video_id, RelationTable of its ground truth) of a plain annotation file, else None.

  Equal to `RelationTable.from_dicts(annotations.load_groundtruth(path, dataset))` where that
  succeeds on a plain file (the checks of `annotations.parse_annotation` and
  `groundtruth_instances`, then the official instances: each relation's boxes over the annotated
  frames of [begin_fid, end_fid)). None: read the file with `annotations.load_groundtruth`.
  """
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError:
    return None  # the dict reader names the file and the error
  buf = np.frombuffer(data, np.uint8)
  size = len(data)
  ints = np.zeros(3, np.int64)
  fps_out = np.zeros(1, np.float64)
  spans = np.zeros((3, 2), np.int64)
  counts = np.zeros(4, np.int64)
  # Capacities no plain file exceeds (an object entry takes >= 24 bytes, a box entry >= 55, a
  # relation >= 80).
  obj_tid = np.empty(size // 24 + 1, np.int64)
  obj_cat = np.empty((size // 24 + 1, 2), np.int64)
  roi_frame = np.empty(size // 55 + 1, np.int64)
  roi_tid = np.empty(size // 55 + 1, np.int64)
  roi_box = np.empty((size // 55 + 1, 4), np.float64)
  rel = np.empty((size // 80 + 1, 4), np.int64)
  rel_pred = np.empty((size // 80 + 1, 2), np.int64)
  args = (
    ints,
    fps_out,
    spans,
    obj_tid,
    obj_cat,
    roi_frame,
    roi_tid,
    roi_box,
    rel,
    rel_pred,
    counts,
  )
  if scan(buf, *args) != OK:
    return None
  no, nf, nb, nr = (int(c) for c in counts)
  frame_count, width, height = (int(v) for v in ints[:3])
  fps = float(fps_out[0])
  if frame_count < 0 or not fps > 0 or width <= 0 or height <= 0:
    return None
  version = None if spans[0, 0] < 0 else _token(data, spans[0])
  if dataset == "vidor" and version != vrd_json.VIDOR_VERSION:
    return None
  if dataset == "vidvrd" and spans[0, 0] >= 0:
    return None
  video_id = _token(data, spans[1])
  tids = obj_tid[:no]
  cats = [_token(data, s) for s in obj_cat[:no]]
  preds = [_token(data, s) for s in rel_pred[:nr]]
  if len(set(tids.tolist())) != no:
    return None
  if dataset is not None and not (
    set(cats) <= set(vrd_categories.object_categories(dataset))
    and set(preds) <= set(vrd_categories.predicates(dataset))
  ):
    return None
  # Columns of the boxes (the object's index) and of the relations' tids; an unknown tid: None.
  order = np.argsort(tids, kind="stable")
  sorted_tids = tids[order]

  def column(t):
    at = np.searchsorted(sorted_tids, t)
    at = np.minimum(at, max(no - 1, 0))
    if no == 0 or np.any(sorted_tids[at] != t):
      return None
    return order[at]

  rel = rel[:nr]
  roi_col = column(roi_tid[:nb])
  s_col, o_col = column(rel[:, 0]), column(rel[:, 1])
  if roi_col is None or s_col is None or o_col is None:
    return None
  ok, boxes, offset, length = _relation_boxes(
    roi_frame[:nb], roi_col, roi_box, rel, s_col, o_col, nf, max(no, 1)
  )
  if not ok:
    return None  # a second box for a tid in a frame, or a frame of a duration without the box
  vocab = {}
  triplet = np.asarray(
    [
      vocab.setdefault((cats[s], p, cats[o]), len(vocab))
      for s, p, o in zip(s_col.tolist(), preds, o_col.tolist())
    ],
    np.int64,
  )
  table = columns.RelationTable(
    video_ids=[video_id],
    bounds=np.asarray([0, nr], np.int64),
    triplets=list(vocab),
    triplet=triplet.reshape(nr),
    score=np.zeros(nr, np.float64),
    duration=rel[:, 2:4].astype(np.float64).reshape(nr, 2),
    flags=np.full(nr, columns.kernels.START_INT | columns.kernels.END_INT, np.uint8),
    boxes=boxes,
    offset=offset,
    length=np.repeat(length[:, None], 2, 1),
    exact_ints=True,
  )
  return video_id, table
