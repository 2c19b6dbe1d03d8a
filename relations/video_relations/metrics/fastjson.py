"""Reads a VRD submission / GT JSON file straight into a `RelationTable`.

`json.load` of a VidOR-sized submission builds hundreds of millions of
Python floats and lists (minutes, and ~13 GB for 69M boxes); the scorer
needs flat float64 arrays. `read_table(path)` parses the bytes with a
compiled scanner (numba) and writes the boxes directly into one [N, 4]
array, with the values `json.load` would give:

- Numbers: Python's `float()` is correctly rounded, so is every path here.
  A decimal with <= 15 significant digits and a decimal exponent within
  +-22 is `m * 10**e` or `m / 10**-e` of two exactly representable doubles,
  one correctly rounded operation (Clinger's fast path). Other decimals with
  <= 19 significant digits (e.g. the 17-digit `repr` of a float) use the
  Eisel-Lemire algorithm (128-bit products with a table of powers of five,
  as fast_float). The rest (> 19 digits, subnormal results) go through
  numpy's correctly rounded string -> float64 cast. The tests compare bits
  with `json.loads` on random, extreme and exactly-halfway tokens.
  `NaN` / `Infinity` / `-Infinity` are accepted as `json.load` does.
- Strings (video ids, names) are decoded with `json.loads` of their raw
  bytes, once per distinct byte string, so escapes decode exactly.
- The whole document is validated as JSON (grammar, nesting); values of
  keys the scorer does not read are validated and skipped.

Anything the table cannot represent exactly - integer scores (the official
integer-array behaviour), integers with more than 15 digits, a box that is
not 4 numbers, a field that is missing or of another type, duplicate keys or
video ids (`json.load` keeps the last) - raises `NotTabular`; callers then
use `json.load` and the dict path, which reproduce the official behaviour
on such input (and the validator explains it).
"""

import json
import lzma

import numpy as np

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import json_scan


class NotTabular(ValueError):
  """The file is valid JSON the table reader does not take; use json.load."""


def read_bytes(path: str) -> bytes:
  """The file's bytes, XZ-decompressed if it is a `.json.xz` (by content)."""
  with open(path, "rb") as f:
    data = f.read()
  if data.startswith(b"\xfd7zXZ\x00"):
    data = lzma.decompress(data)
  return data


def parse_table(data: bytes, groundtruth: bool = False,
                name: str = "<bytes>") -> columns.RelationTable:
  """A submission (or GT JSON) document -> `RelationTable`.

  Args:
    data: the JSON bytes (UTF-8).
    groundtruth: the document is the GT mapping `{video_id: [...]}` (no
      "results" wrapper, no scores) instead of a submission.
    name: used in error messages.

  Returns:
    The table, videos and rows in file order, `exact_ints` set (integers
    in the file are Python ints for the official code).

  Raises:
    NotTabular: invalid JSON or content the table does not represent
      exactly (see the module docstring); the message names the byte.
  """
  buf = np.frombuffer(data, np.uint8)
  if len(buf) and buf.max() >= 0x80:
    try:
      data.decode("utf-8")
    except UnicodeDecodeError as e:
      raise NotTabular(f"{name}: not UTF-8: {e}") from None
  # '[' bounds the boxes and videos, '{' the predictions.
  n_open, n_obj = (int(x) + 1 for x in json_scan.count_brackets(buf))
  boxes = np.empty(4 * n_open)
  name_tok = np.zeros((n_obj, 3, 2), np.int64)
  score = np.empty(n_obj)
  dur = np.zeros((n_obj, 2))
  dur_flags = np.zeros(n_obj, np.uint8)
  traj = np.zeros((n_obj, 2, 2), np.int64)
  video_tok = np.zeros((n_open, 2), np.int64)
  video_bounds = np.zeros(n_open + 1, np.int64)
  counts = np.zeros(4, np.int64)
  slow = np.empty((min(1 << 20, 4 * n_open + 3 * n_obj), 2), np.int64)
  while True:
    err, pos = json_scan.scan(buf, groundtruth, boxes, name_tok, score, dur,
                              dur_flags, traj, video_tok, video_bounds, slow,
                              counts)
    if err != json_scan.SLOW_FULL:
      break
    slow = np.empty((4 * n_open + 3 * n_obj, 2), np.int64)
  if err:
    raise NotTabular(f"{name}: byte {pos}: {json_scan.MESSAGES[err]}")
  nv, npred, nbox, nslow = map(int, counts)
  boxes = boxes[:4 * nbox]
  if nslow:
    # Exact conversion of the tokens the fast path does not take.
    rows = json_scan.slow_tokens(buf, slow[:nslow, 0])
    values = rows.view(f"S{rows.shape[1]}").reshape(-1).astype(np.float64)
    target, kind = slow[:nslow, 1] // 4, slow[:nslow, 1] % 4
    boxes[target[kind == 0]] = values[kind == 0]
    score[target[kind == 1]] = values[kind == 1]
    dur.reshape(-1)[target[kind == 2]] = values[kind == 2]
  # Names: one json.loads per distinct raw token, then one id per triplet.
  tok = name_tok[:npred].reshape(-1, 2)
  ids, reps, collision = json_scan.name_ids(buf, tok)
  if collision:
    raise NotTabular(f"{name}: name hash collision")
  names = [json.loads(data[tok[r, 0]:tok[r, 1]]) for r in reps]
  ids = ids.reshape(-1, 3)
  triplet = np.zeros(len(ids), np.int64)
  vocab = {}
  if len(ids):
    uniq, first, inverse = np.unique(ids, axis=0, return_index=True,
                                     return_inverse=True)
    # Ids in order of first occurrence (as `RelationTable.from_dicts`).
    order = np.argsort(first, kind="stable")
    remap = np.empty(len(uniq), np.int64)
    for u in order.tolist():
      remap[u] = vocab.setdefault(tuple(names[j] for j in uniq[u].tolist()),
                                  len(vocab))
    triplet = remap[inverse.reshape(-1)]
  video_ids = [json.loads(data[s:e]) for s, e in video_tok[:nv].tolist()]
  if len(set(video_ids)) != nv:
    raise NotTabular(f"{name}: a video id appears twice (json.load keeps "
                     "the last)")
  t = traj[:npred]
  return columns.RelationTable(
      video_ids=video_ids, bounds=video_bounds[:nv + 1].copy(),
      triplets=list(vocab), triplet=triplet, score=score[:npred].copy(),
      duration=dur[:npred].copy(), flags=dur_flags[:npred].copy(),
      boxes=boxes.reshape(-1, 4), offset=np.ascontiguousarray(t[:, :, 0]),
      length=np.ascontiguousarray(t[:, :, 1]), exact_ints=True)


def read_table(path: str, groundtruth: bool = False) -> columns.RelationTable:
  """`parse_table` of a `.json` / `.json.xz` file (see there)."""
  return parse_table(read_bytes(path), groundtruth, name=path)
