"""Reading submissions / ground truth and writing metrics for the VRD CLI.

Submission: `{"version": "VERSION 1.0", "results": {video_id:
[{triplet, score, duration, sub_traj, obj_traj}]}, "external_data": ...}` as
`.json` or XZ-compressed `.json.xz` (the VRU'20 server's upload format).
Ground truth: an official annotation folder / file or one consolidated GT JSON
(`relations.video_relations.data.annotations.load_groundtruth`); a folder is read in the
order the official dataset classes read it (`official_annotation_files`).
The CLI reads both into columns (`read_groundtruth_table`, `fastjson`);
`load_submission` / `load_groundtruth` (dicts) remain for the dict oracle.
"""

from concurrent import futures
import glob
import json
import lzma
import os
import re
from typing import Any

import numpy as np

from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import annotation_scan
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import fastjson
from relations.io_util import write_json_atomic  # noqa: F401  (re-exported: cli.py calls io.write_json_atomic)


class SubmissionError(ValueError):
  """A submission file that cannot be read as JSON."""


_WS = re.compile(r"[ \t\n\r]*")


def _object_members(text: str, i: int, value_at, dups: list):
  """Parses the JSON object at text[i] == "{" member by member; returns (dict, end).

  `value_at(key, j)` parses the value starting at j and returns (value, end). Keys seen twice
  go to `dups` (the standard parser keeps the last one silently).
  """
  out = {}
  i = _WS.match(text, i + 1).end()
  if text.startswith("}", i):
    return out, i + 1
  while True:
    if not text.startswith('"', i):
      raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
    key, i = json.decoder.scanstring(text, i + 1)
    i = _WS.match(text, i).end()
    if not text.startswith(":", i):
      raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
    value, i = value_at(key, _WS.match(text, i + 1).end())
    if key in out:
      dups.append(key)
    out[key] = value
    i = _WS.match(text, i).end()
    if text.startswith(",", i):
      i = _WS.match(text, i + 1).end()
    elif text.startswith("}", i):
      return out, i + 1
    else:
      raise json.JSONDecodeError("Expecting ',' delimiter", text, i)


def _loads_submission(text: str, dups: list) -> Any:
  """`json.loads(text)`, noting duplicated keys of the top level and of `results`.

  The two outer levels are walked here (a few thousand members); every video's prediction
  list is parsed by the C decoder in one call, so this costs what `json.loads` costs.
  """
  decoder = json.JSONDecoder()
  i = _WS.match(text, 0).end()
  if not text.startswith("{", i):
    return json.loads(text)

  def top_value(key, j):
    if key == "results" and text.startswith("{", j):
      return _object_members(text, j, lambda _, k: decoder.raw_decode(text, k), dups)
    return decoder.raw_decode(text, j)

  obj, i = _object_members(text, i, top_value, dups)
  i = _WS.match(text, i).end()
  if i != len(text):
    raise json.JSONDecodeError("Extra data", text, i)
  return obj


def load_submission(path: str) -> Any:
  """Parses a submission `.json` or `.json.xz` (detected by content).

  Raises:
    FileNotFoundError: no such file.
    SubmissionError: unreadable / not JSON / a video (or top-level key) listed twice, naming
      the file.
  """
  if os.path.isdir(path):
    raise SubmissionError(f"{path}: is a directory; expected a submission .json / .json.xz")
  with open(path, "rb") as f:
    head = f.read(6)
  dups = []
  try:
    if head.startswith(b"\xfd7zXZ\x00"):
      with lzma.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    else:
      with open(path, "r", encoding="utf-8") as f:
        text = f.read()
    sub = _loads_submission(text, dups)
  except (lzma.LZMAError, EOFError, UnicodeDecodeError) as e:
    raise SubmissionError(f"{path}: cannot decompress / decode: {e}") from e
  except json.JSONDecodeError as e:
    raise SubmissionError(f"{path}: malformed JSON: {e}") from e
  except RecursionError:
    raise SubmissionError(
      f"{path}: JSON nested too deeply; expected a submission {{\"results\": {{video_id: [...]}}}}"
    ) from None
  except ValueError as e:  # an integer literal beyond Python's digit limit
    raise SubmissionError(f"{path}: unreadable JSON value: {e}") from None
  if dups:
    results = sub.get("results") if isinstance(sub, dict) else None
    videos = set(results) if isinstance(results, dict) else set()
    raise SubmissionError(f"{path}: {fastjson.duplicate_message(dups, videos)}")
  return sub


# The official loaders' patterns (xdshang/VidVRD-helper and NExTplusplus
# `dataset/vidor.py`, `dataset/vidvrd.py` / `imagenet_vidvrd.py`), relative
# to a split folder such as `annotation/validation` or `test`.
_PATTERNS = {"vidor": os.path.join("*", "*.json"), "vidvrd": "*.json"}


def official_annotation_files(folder: str, dataset: str | None = None) -> list[str]:
  """Annotation files of a split folder in the official reading order.

  The official dataset classes list a split with `glob.glob` (VidOR
  `<split>/*/*.json`, VidVRD `<split>/*.json`), i.e. in directory order, not
  sorted, and their ground-truth dict keeps that order. The order matters:
  the mAP is `np.mean` over the per-video APs in dict order (pairwise
  summation), so another order can change its last bit. The same `glob`
  call is made here.

  Args:
    folder: the split folder.
    dataset: "vidor" or "vidvrd"; None: the layout that has files (a folder
      with both needs `dataset`).

  Returns:
    Paths in official order.

  Raises:
    FileNotFoundError: no annotation file where the official code looks.
    vrd_json.AnnotationError: both layouts present and no `dataset`.
  """
  found = {d: glob.glob(os.path.join(folder, pattern)) for d, pattern in _PATTERNS.items()}
  if dataset is None:
    present = [d for d, files in found.items() if files]
    if len(present) > 1:
      raise vrd_json.AnnotationError(
        f"{folder}: holds both <group>/*.json (VidOR) and "
        "*.json (VidVRD) annotation files; pass the dataset"
      )
    dataset = present[0] if present else "vidor"
  if not found[dataset]:
    raise FileNotFoundError(
      f"{folder}: no annotation files at "
      f"{os.path.join(folder, _PATTERNS[dataset])} (official {dataset} "
      "layout)"
    )
  return found[dataset]


def load_groundtruth(path: str, dataset: str | None = None) -> dict:
  """Official GT `{video_id: [instances]}` from a folder, file or GT JSON.

  A folder is read file by file in `official_annotation_files` order, so
  the videos (and the mAP's summation order) are the official ones.
  """
  if not os.path.isdir(path):
    return vrd_json.load_groundtruth(path, dataset=dataset)
  out, source = {}, {}
  for f in official_annotation_files(path, dataset):
    for vid, rels in vrd_json.load_groundtruth(f, dataset=dataset).items():
      if vid in out:
        raise vrd_json.AnnotationError(f"{f}: video_id {vid} also in {source[vid]}")
      source[vid] = f
      out[vid] = rels
  return out


def _shared(table: columns.RelationTable, vocab: fastjson.Vocabulary):
  """`table` with its triplet ids in `vocab` (for `concat_tables`)."""
  remap = np.asarray([vocab.triplet_id(t) for t in table.triplets], np.int64)
  table.triplet = remap[table.triplet] if len(remap) else table.triplet
  table.triplets = vocab.triplets
  return table


def _strip(table: columns.RelationTable) -> columns.RelationTable:
  """The table without its boxes (only the triplets are wanted)."""
  table.boxes = np.zeros((0, 4))
  table.offset = np.zeros_like(table.offset)
  table.length = np.zeros_like(table.length)
  return table


def read_groundtruth_table(
  path: str, dataset: str | None = None, keep_boxes: bool = True
) -> columns.RelationTable:
  """The ground truth as a `RelationTable`, never as one object tree.

  Same input, videos, order, values and errors as `load_groundtruth`: an
  annotation folder is read file by file (official `glob` order; a plain file by
  `annotation_scan`, any other by `load_groundtruth`), a
  consolidated GT JSON is scanned window by window (`fastjson`), and only
  a video whose records are not plain (or, with `dataset`, name a
  category or predicate the dataset lacks) is decoded alone and checked by
  the same code (`annotations._groundtruth_from_json`). A document that
  json.loads cannot read (nested too deeply, a huge integer) is refused
  with load_json's words, and one with a key of an annotation file is read
  as that annotation file.

  Args:
    path: annotation folder, annotation file or consolidated GT JSON.
    dataset: "vidor" / "vidvrd" / None (as `load_groundtruth`).
    keep_boxes: False keeps no boxes (e.g. only the triplets of a training
      split are needed).

  Raises:
    FileNotFoundError, vrd_json.AnnotationError: as `load_groundtruth`.
  """
  vocab = fastjson.Vocabulary()
  keep = (lambda t: t) if keep_boxes else _strip
  if os.path.isdir(path):
    parts, order, source = [], {}, {}
    files = official_annotation_files(path, dataset)

    # The compiled scan releases the GIL: files are read on several cores, taken in order.
    def scan(f):
      plain = annotation_scan.groundtruth_table(f, dataset)
      return None if plain is None else keep(plain[1])  # boxes dropped as soon as read

    with futures.ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
      tables = list(pool.map(scan, files))
    for f, table in zip(files, tables):
      if table is None:  # not plain: the checking reader says why, or reads it
        gt = vrd_json.load_groundtruth(f, dataset=dataset)
        table = keep(columns.RelationTable.from_dicts(gt))
      for vid in table.video_ids:
        if vid in source:
          raise vrd_json.AnnotationError(f"{f}: video_id {vid} also in {source[vid]}")
        source[vid] = f
      parts.append(_shared(table, vocab))
      for j, vid in enumerate(table.video_ids):
        order[vid] = (len(parts) - 1, j)
    return fastjson.concat_tables(parts, order)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no such file or folder")
  parts, order, errors = [], {}, {}
  with open(path, "rb") as f:
    plain = not f.read(6).startswith(fastjson.XZ_MAGIC)
  size = os.path.getsize(path)
  # The boxes kept: a plain file in one window (mapped, not read), with
  # output arrays it cannot fill (a box takes >= 9 bytes, a record >= 60),
  # untouched capacity being address space only. With two CPUs it is scanned
  # in two threads (two chunks) whose boxes share one array (`fastjson._scan`),
  # so joining them copies only the row columns: copying the boxes cost
  # 0.4-2.8 s on a 288 MB GT here, as fresh memory costs more or less.
  whole = plain and keep_boxes
  window = size + 1 if whole else None
  capacity = (size // 7 + 16, size // 60 + 16, size // 9 + 16) if whole else (None)
  known = None  # [names, 3] bool: the name is a known s / p / o
  if dataset is not None:
    objects = set(vrd_categories.object_categories(dataset))
    pools = (objects, set(vrd_categories.predicates(dataset)), objects)
  try:
    for kind, chunk in fastjson.scan_document(
      path,
      groundtruth=True,
      vocab=vocab,
      window=window,
      capacity=capacity,
    ):
      if kind == "annotation":
        plain = annotation_scan.groundtruth_table(path, dataset)
        if plain is not None:
          return keep(_shared(plain[1], vocab))
        gt = vrd_json.load_groundtruth(path, dataset=dataset)
        return keep(_shared(columns.RelationTable.from_dicts(gt), vocab))
      if kind == "not_object":
        raise vrd_json.AnnotationError(f"{path}: ground truth must map video ids to lists")
      if kind != "chunk":
        continue
      # Records to check with `load_groundtruth`'s code: the irregular
      # ones and, with a dataset, those naming an unknown category.
      suspect = chunk.flag == fastjson.IRREGULAR
      plain = ~suspect
      if dataset is not None and plain.any():
        names = chunk.vocab.names
        if known is None or len(known) < len(names):
          have = 0 if known is None else len(known)
          new = np.asarray([[n in pool for pool in pools] for n in names[have:]], bool).reshape(
            -1, 3
          )
          known = new if known is None else np.concatenate([known, new])
        ids = np.where(plain[:, None], chunk.names, 0)
        suspect |= plain & ~known[ids, np.arange(3)].all(1)
      for v, vid in enumerate(chunk.video_ids):
        errors.pop(vid, None)
        if not chunk.is_list[v]:
          errors[vid] = vrd_json.AnnotationError(f"{path}: video {vid}: expected a list")
        elif suspect[chunk.rows[v] : chunk.rows[v + 1]].any():
          try:
            vrd_json._groundtruth_from_json(  # pylint: disable=protected-access
              {vid: chunk.decode_value(v)}, path, dataset
            )
          except vrd_json.AnnotationError as e:
            errors[vid] = e
      parts.append(keep(fastjson.chunk_table(chunk, copy=window is None)))
      for j, vid in enumerate(chunk.video_ids):
        order[vid] = (len(parts) - 1, j)
  except fastjson.FormatError as e:
    raise vrd_json.AnnotationError(e.message(path, decode="cannot read")) from None
  for vid in order:
    if vid in errors:
      raise errors[vid]
  return fastjson.concat_tables(parts, order)
