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

from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import json_scan

_ws = json_scan._ws  # pylint: disable=protected-access
_string_end = json_scan._string_end  # pylint: disable=protected-access
_number = json_scan._number  # pylint: disable=protected-access
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
  v, kind, e = _number(buf, i)
  if kind != _INT:
    return 0, -1
  return np.int64(v), e


@numba.njit(cache=True, nogil=True, _nrt=False)
def _finite(buf, i):
  """A finite number token at i (<= 15 digits if an integer): (value, end); end -1 otherwise."""
  v, kind, e = _number(buf, i)
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
  n = len(buf)
  spans[:] = -1
  counts[:] = 0
  no, nf, nb, nr = 0, 0, 0, 0
  i, more = _open(buf, _ws(buf, 0), 123)
  if i < 0 or not more:
    return NOT_PLAIN
  seen = 0
  while True:
    key, i = _key(buf, i, _ROOT, _OBJ)
    if key == -2:
      return NOT_PLAIN
    if key >= 0:
      if seen & (1 << key):
        return NOT_PLAIN  # json.loads keeps the last: the slow path says what that means
      seen |= 1 << key
    e = -1
    if key == K_VERSION or key == K_VIDEO_ID or key == K_VIDEO_PATH:
      if i < n and buf[i] == 34:
        e = _string_end(buf, i)
        if e < 0:
          return NOT_PLAIN
        spans[0 if key == K_VERSION else (1 if key == K_VIDEO_ID else 2), 0] = i
        spans[0 if key == K_VERSION else (1 if key == K_VIDEO_ID else 2), 1] = e
      elif key == K_VIDEO_PATH and i + 4 <= n and buf[i] == 110:  # null
        if buf[i + 1] != 117 or buf[i + 2] != 108 or buf[i + 3] != 108:
          return NOT_PLAIN
        e = i + 4
      else:
        return NOT_PLAIN
    elif key == K_FRAME_COUNT or key == K_WIDTH or key == K_HEIGHT:
      v, e = _int(buf, i)
      if e < 0:
        return NOT_PLAIN
      ints[0 if key == K_FRAME_COUNT else (1 if key == K_WIDTH else 2)] = v
    elif key == K_FPS:
      v, e = _finite(buf, i)
      if e < 0:
        return NOT_PLAIN
      fps[0] = v
    elif key == K_OBJECTS:
      e, more = _open(buf, i, 91)
      while more:
        if no == len(obj_tid):
          return NOT_PLAIN
        j, more = _open(buf, e, 123)
        if j < 0 or not more:
          return NOT_PLAIN
        got = 0
        while True:
          k, j = _key(buf, j, _OBJ, _ROI)
          if k == -2 or (k >= 0 and got & (1 << k)):
            return NOT_PLAIN
          if k == 0:
            obj_tid[no], j = _int(buf, j)
          elif k == 1:
            if j >= n or buf[j] != 34:
              return NOT_PLAIN
            obj_cat[no, 0] = j
            j = _string_end(buf, j)
            obj_cat[no, 1] = j
          else:
            j, status, _ = _skip(buf, j)
            if status:
              return NOT_PLAIN
          if j < 0:
            return NOT_PLAIN
          if k >= 0:
            got |= 1 << k
          j, more = _after_item(buf, j, 125)
          if j < 0:
            return NOT_PLAIN
          if not more:
            break
        if got != 3:
          return NOT_PLAIN
        no += 1
        e, more = _after_item(buf, j, 93)
        if e < 0:
          return NOT_PLAIN
    elif key == K_TRAJECTORIES:
      e, more = _open(buf, i, 91)
      while more:
        j, frame_more = _open(buf, e, 91)
        if j < 0:
          return NOT_PLAIN
        while frame_more:
          if nb == len(roi_tid):
            return NOT_PLAIN
          j, more2 = _open(buf, j, 123)
          if j < 0 or not more2:
            return NOT_PLAIN
          got = 0
          while True:
            k, j = _key(buf, j, _ROI, _BOX)
            if k == -2 or (k >= 0 and got & (1 << k)):
              return NOT_PLAIN
            if k == 0:
              roi_tid[nb], j = _int(buf, j)
            elif k == 1:  # bbox
              j, more3 = _open(buf, j, 123)
              if j < 0 or not more3:
                return NOT_PLAIN
              gotb = 0
              while True:
                kb, j = _key(buf, j, _BOX, _REL)
                if kb == -2 or (kb >= 0 and gotb & (1 << kb)):
                  return NOT_PLAIN
                if kb >= 0:
                  roi_box[nb, kb], j = _finite(buf, j)
                  gotb |= 1 << kb
                else:
                  j, status, _ = _skip(buf, j)
                  if status:
                    return NOT_PLAIN
                if j < 0:
                  return NOT_PLAIN
                j, more3 = _after_item(buf, j, 125)
                if j < 0:
                  return NOT_PLAIN
                if not more3:
                  break
              if gotb != 15:
                return NOT_PLAIN
              if roi_box[nb, 0] > roi_box[nb, 2] or roi_box[nb, 1] > roi_box[nb, 3]:
                return NOT_PLAIN
            elif k == 2:  # generated: the integer 0 or 1 (anything else: the slow path)
              g, j = _int(buf, j)
              if g != 0 and g != 1:
                return NOT_PLAIN
            else:
              j, status, _ = _skip(buf, j)
              if status:
                return NOT_PLAIN
            if j < 0:
              return NOT_PLAIN
            if k >= 0:
              got |= 1 << k
            j, more2 = _after_item(buf, j, 125)
            if j < 0:
              return NOT_PLAIN
            if not more2:
              break
          if got & 3 != 3:
            return NOT_PLAIN
          roi_frame[nb] = nf
          nb += 1
          j, frame_more = _after_item(buf, j, 93)
          if j < 0:
            return NOT_PLAIN
        nf += 1
        e, more = _after_item(buf, j, 93)
        if e < 0:
          return NOT_PLAIN
    elif key == K_RELATIONS:
      e, more = _open(buf, i, 91)
      while more:
        if nr == len(rel):
          return NOT_PLAIN
        j, more2 = _open(buf, e, 123)
        if j < 0 or not more2:
          return NOT_PLAIN
        got = 0
        while True:
          k, j = _key(buf, j, _REL, len(_LEN))
          if k == -2 or (k >= 0 and got & (1 << k)):
            return NOT_PLAIN
          if k == 2:
            if j >= n or buf[j] != 34:
              return NOT_PLAIN
            rel_pred[nr, 0] = j
            j = _string_end(buf, j)
            rel_pred[nr, 1] = j
          elif k >= 0:
            rel[nr, k if k < 2 else k - 1], j = _int(buf, j)
          else:
            j, status, _ = _skip(buf, j)
            if status:
              return NOT_PLAIN
          if j < 0:
            return NOT_PLAIN
          if k >= 0:
            got |= 1 << k
          j, more2 = _after_item(buf, j, 125)
          if j < 0:
            return NOT_PLAIN
          if not more2:
            break
        if got != 31 or not 0 <= rel[nr, 2] < rel[nr, 3]:
          return NOT_PLAIN
        nr += 1
        e, more = _after_item(buf, j, 93)
        if e < 0:
          return NOT_PLAIN
    else:
      e, status, _ = _skip(buf, i)
      if status:
        return NOT_PLAIN
    if e < 0:
      return NOT_PLAIN
    i, more = _after_item(buf, e, 125)
    if i < 0:
      return NOT_PLAIN
    if not more:
      break
  if _ws(buf, i) != n or seen & _REQUIRED != _REQUIRED:
    return NOT_PLAIN
  counts[0], counts[1], counts[2], counts[3] = no, nf, nb, nr
  return OK


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

  roi_col = column(roi_tid[:nb])
  rel = rel[:nr]
  s_col, o_col = column(rel[:, 0]), column(rel[:, 1])
  if roi_col is None or s_col is None or o_col is None:
    return None
  where = np.full((nf, max(no, 1)), -1, np.int64)
  where[roi_frame[:nb], roi_col] = np.arange(nb)
  if nb and np.count_nonzero(where >= 0) != nb:
    return None  # a second box for a tid in a frame
  # Each relation's frames: [begin, min(end, frames)) (the official slice of the frame list).
  begin = rel[:, 2]
  length = np.maximum(np.minimum(rel[:, 3], nf) - begin, 0)
  starts = np.repeat(begin - np.cumsum(length) + length, length)
  frames = starts + np.arange(int(length.sum()))
  rows_s = where[frames, np.repeat(s_col, length)]
  rows_o = where[frames, np.repeat(o_col, length)]
  if np.any(rows_s < 0) or np.any(rows_o < 0):
    return None  # a frame of a duration without the box: the slow path's error
  # from_dicts' layout: per relation its subject's boxes, then its object's.
  bounds = np.concatenate([[0], np.cumsum(length)])
  boxes = np.empty((2 * len(frames), 4), np.float64)
  offset = np.zeros((nr, 2), np.int64)
  for r in range(nr):
    a, b = bounds[r], bounds[r + 1]
    offset[r, 0] = 2 * a
    offset[r, 1] = 2 * a + (b - a)
    boxes[2 * a : 2 * a + (b - a)] = roi_box[rows_s[a:b]]
    boxes[2 * a + (b - a) : 2 * b] = roi_box[rows_o[a:b]]
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
    length=np.repeat(length[:, None], 2, 1).astype(np.int64),
    exact_ints=True,
  )
  return video_id, table
