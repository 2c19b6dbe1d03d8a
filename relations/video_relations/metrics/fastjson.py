"""Reads a VRD submission / GT JSON file straight into columns.

`json.load` of a VidOR-sized submission builds hundreds of millions of
Python floats and lists (minutes, and ~13 GB for 69M boxes); the scorer
needs flat float64 arrays. `scan_document(path)` reads the file (`.json`,
or `.json.xz` detected by content, decompressed by a read-ahead thread)
window by window, and a compiled scanner (`json_scan.scan_window`) turns
the whole videos of each window into `Chunk`s of arrays, with the values
`json.load` would give:

- Numbers: Python's `float()` is correctly rounded, so is every path here.
  A decimal with <= 15 significant digits and a decimal exponent within
  +-22 is `m * 10**e` or `m / 10**-e` of two exactly representable doubles,
  one correctly rounded operation (Clinger's fast path). Other decimals with
  <= 19 significant digits (e.g. the 17-digit `repr` of a float) use the
  Eisel-Lemire algorithm (128-bit products with a table of powers of five,
  as fast_float). The tests compare bits with `json.loads`.
- Strings (video ids, names) are decoded once per distinct byte string
  (`json.loads` where they hold escapes).
- The whole document is validated as JSON (grammar, nesting, UTF-8);
  values of keys the scorer does not read are validated and skipped. A
  repeated key keeps the last value at the first key's position, as
  `json.load` builds a dict (or, `unique_keys`, a repeated video id or
  top-level key refuses the submission, as `io.load_submission`). What
  `json.loads` cannot read is refused too: nesting deeper than
  `json_scan.MAX_DEPTH`, an integer of more digits than `int(str)` takes.
- A record the arrays do not represent - a missing, repeated or
  mistyped field, an integer score, a number beyond the fast paths, a
  triplet that is not 3 strings - is "irregular": its bytes are decoded
  with `json.loads` (`Chunk.decode`), so the validator and the scorer see
  exactly the object `json.load` would give.

Memory: one window (64 MiB unless a single video is larger) and the arrays
of its videos; the consumer scores or keeps each chunk.

Threads: with `parallel` (the default where 2 or more CPUs are ours), each
window is scanned by two threads, cut at a guessed boundary between two
videos; the second thread's part is kept only if the first thread's scan
stops exactly at the cut, between two videos (see `_scan`). Events, errors
and positions are those of the sequential scan; only the chunks may hold
other runs of videos.

`read_table(path)` / `parse_table(bytes)` collect a whole document into one
`RelationTable`.
"""

import copy
import dataclasses
import json
import lzma
import mmap
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import numpy as np

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import json_scan

WINDOW = 64 << 20  # initial window (bytes)
BLOCK = 8 << 20  # read-ahead block (bytes)
CAPACITY = (4096, 1 << 16, 1 << 21)  # initial videos, records, boxes


def capacity_for(nbytes: int | None) -> tuple:
  """Initial (videos, records, boxes) for a document of `nbytes` bytes (None:
  unknown, e.g. compressed): no more than it can hold (a video takes >= 7
  bytes, a record >= 60, a box >= 9), at most `CAPACITY`.

  Untouched capacity is address space only while numpy's zeroed arrays are
  fresh mappings; once glibc serves such sizes from its heap (its mmap
  threshold rises after big frees, or `shm_transport.tune_allocator`),
  `np.zeros` writes every byte: a small document's scan then zeroed ~70 MB
  per output set (measured: 6.4 s against 0.7 s per case of
  test_fastjson_parallel late in the test suite).
  """
  if nbytes is None:
    return CAPACITY
  return tuple(min(c, nbytes // d + 16) for c, d in zip(CAPACITY, (7, 60, 9)))


# The least bytes left to scan in a window for which a second thread helps
# (`scan_document(parallel=True)`; ~10 ms of scanning).
SPLIT_MIN = 4 << 20
# Cuts of one document that may miss (the second thread's work is lost) before
# its other windows are scanned in one thread: a bound on the work a document
# that misleads the guess costs.
MAX_MISSES = 3
IRREGULAR = json_scan.IRREGULAR
WARN = json_scan.WARN
XZ_MAGIC = b"\xfd7zXZ\x00"


_FORMAT_ERROR_WHAT = {
  "json": "malformed JSON",
  "deep": "JSON nested too deeply",
  "value": "unreadable JSON value",
  "decode": "cannot decompress / decode",
}


class FormatError(ValueError):
  """Not a JSON document: `kind` "json" (malformed), "deep" (nested deeper
  than json_scan.MAX_DEPTH), "value" (an integer json.loads refuses),
  "decode" (not XZ / not UTF-8) or "duplicate" (`scan_document` with
  unique_keys: a video or top-level key twice); `detail` says what and
  where."""

  def __init__(self, kind: str, detail: str):
    super().__init__(detail)
    self.kind = kind
    self.detail = detail

  def message(self, name: str, decode: str | None = None) -> str:
    """`name: <what>: detail` (the wording of `io.load_submission`);
    `decode` replaces the "decode" kind's words."""
    what = (
      _FORMAT_ERROR_WHAT.get(self.kind) if self.kind != "decode" or (decode is None) else decode
    )
    return f"{name}: {what}: {self.detail}" if what else (f"{name}: {self.detail}")


def duplicate_message(dups: list, videos) -> str:
  """The refusal of a submission whose `results` (or top level) repeats a
  key: `dups` the repeated keys in the order json.load meets them, `videos`
  the keys of the last `results` object."""
  what = "video" if dups[0] in videos else "key"
  return (
    f"{what} {dups[0]!r} appears more than once ({len(dups)} "
    "duplicated key(s)); JSON readers keep only the last, so the other "
    "predictions would be lost. Merge them into one entry"
  )


class NotTabular(ValueError):
  """`read_table`: a record a table cannot hold (e.g. a missing field)."""


class Vocabulary:
  """Names and triplets of one document, ids in first-occurrence order."""

  def __init__(self):
    self.names: list[str] = []
    self.name_index: dict[str, int] = {}
    self.triplets: list[tuple] = []
    self.triplet_index: dict[tuple, int] = {}
    self.triplet_keys: dict[int, int] = {}  # packed name ids (`triplet_ids`) -> triplet id

  def name_id(self, name: str) -> int:
    i = self.name_index.get(name)
    if i is None:
      i = self.name_index[name] = len(self.names)
      self.names.append(name)
    return i

  def triplet_id(self, triplet: tuple) -> int:
    i = self.triplet_index.get(triplet)
    if i is None:
      i = self.triplet_index[triplet] = len(self.triplets)
      self.triplets.append(triplet)
    return i

  def triplet_ids(self, ids: np.ndarray) -> np.ndarray:
    """[R, 3] int64 name ids -> [R] int64 triplet ids; new triplets are numbered in the order
    of their sorted name ids."""
    if len(self.names) > _KEY_MASK:  # too many names for a key: one tuple per distinct row
      uniq, inverse = np.unique(ids, axis=0, return_inverse=True)
      tid = [self.triplet_id(tuple(self.names[j] for j in u)) for u in uniq.tolist()]
      return np.asarray(tid, np.int64)[inverse.reshape(-1)]
    # One int64 per row, ordered as the rows are lexicographically (name ids >= 0).
    key = (ids[:, 0] << (2 * _KEY_BITS)) | (ids[:, 1] << _KEY_BITS) | ids[:, 2]
    uniq, inverse = np.unique(key, return_inverse=True)
    known, names = self.triplet_keys, self.names
    tid = []
    for k in uniq.tolist():
      t = known.get(k)
      if t is None:
        a, b, c = k >> (2 * _KEY_BITS), (k >> _KEY_BITS) & _KEY_MASK, k & _KEY_MASK
        t = known[k] = self.triplet_id((names[a], names[b], names[c]))
      tid.append(t)
    return np.asarray(tid, np.int64)[inverse]


_KEY_BITS = 21  # bits per name id in a triplet key (3 x 21 < 63)
_KEY_MASK = (1 << _KEY_BITS) - 1


def _decode_token(raw: bytes) -> str:
  """A JSON string token (with quotes) -> str, as json.loads."""
  if b"\\" not in raw:
    return raw[1:-1].decode("utf-8")
  return json.loads(raw)


@dataclasses.dataclass
class Chunk:
  """Whole videos of one window. Valid until the generator resumes.

  Attributes:
    buf: the window's bytes; base: their offset in the document.
    video_ids: [V] decoded keys, in document order (may repeat).
    is_list: [V] bool, the video's value is an array.
    value_span: [V, 2] byte span of each video's value in `buf`.
    rows: [V + 1] row bounds of each video's records.
    span: [P, 2] byte span of each record in `buf`.
    flag: [P] uint8: 0 plain, WARN plain with something to validate,
      IRREGULAR (only `span` is meaningful; see `decode`).
    triplet: [P] int64 id in `vocab.triplets` (-1 for irregular rows).
    names: [P, 3] int64 ids in `vocab.names` (-1 for irregular rows).
    score, duration [P, 2], flags (kernels.START_INT | END_INT), traj
    [P, 2, 2] (first box, count) per side; boxes [N, 4] float64.
    raw: None, or (a detached chunk, `buf` None) the bytes of every flagged
      row, {row: bytes}.
  """

  buf: np.ndarray
  base: int
  video_ids: list
  is_list: np.ndarray
  value_span: np.ndarray
  rows: np.ndarray
  span: np.ndarray
  flag: np.ndarray
  triplet: np.ndarray
  names: np.ndarray
  score: np.ndarray
  duration: np.ndarray
  flags: np.ndarray
  traj: np.ndarray
  boxes: np.ndarray
  vocab: Vocabulary
  raw: dict | None = None

  def decode(self, row: int) -> Any:
    """The record as `json.load` gives it."""
    if self.raw is not None:
      return json.loads(self.raw[row])
    s, e = self.span[row]
    return json.loads(self.buf[s:e].tobytes())

  def decode_value(self, video: int) -> Any:
    """The value of video `video` (its index in the chunk), decoded."""
    s, e = self.value_span[video]
    return json.loads(self.buf[s:e].tobytes())


class _Source:
  """Decompressed blocks of a file, read ahead by a thread (file reads and
  lzma release the GIL, so reading overlaps the scan)."""

  def __init__(self, path: str, block: int = BLOCK):
    self.path = path
    self.file = open(path, "rb")  # pylint: disable=consider-using-with
    self.xz = self.file.read(6).startswith(XZ_MAGIC)
    self.file.seek(0)
    self.readinto = None
    # Bytes of the document, where known (a plain regular file).
    self.size = None if self.xz else (os.fstat(self.file.fileno()).st_size or None)
    if not self.xz:
      # Plain files: straight into the window (one copy, no thread).
      self.readinto = self.file.readinto
      return
    self.done = False
    self.q = queue.Queue(maxsize=3)
    self.stop = threading.Event()
    self.thread = threading.Thread(target=self._run, args=(block,), daemon=True)
    self.thread.start()

  def _run(self, block):
    try:
      f = lzma.open(self.path, "rb") if self.xz else open(self.path, "rb")
      with f:
        while not self.stop.is_set():
          data = f.read(block)
          self._put(data)
          if not data:
            return
    except (lzma.LZMAError, EOFError, OSError) as e:
      self._put(e)

  def _put(self, item):
    while not self.stop.is_set():
      try:
        self.q.put(item, timeout=0.1)
        return
      except queue.Full:
        continue

  def mapped(self, window: int) -> np.ndarray | None:
    """The whole plain file as a window (a copy-on-write mapping of the page cache: no read
    copy, no fresh pages) when it fits in `window` bytes; None otherwise."""
    if self.xz:
      return None
    try:
      size = os.fstat(self.file.fileno()).st_size
      if not 0 < size < window:
        return None
      # pylint: disable-next=consider-using-with
      mapping = mmap.mmap(self.file.fileno(), size, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):  # not a regular file (a pipe), or no mmap here
      return None
    self.file.seek(size)  # read() (`_utf8_error`): nothing after the window
    return np.frombuffer(mapping, np.uint8)

  def read(self) -> bytes:
    if not self.xz:
      return self.file.read(BLOCK)
    if self.done:  # the thread has ended
      return b""
    item = self.q.get()
    if not isinstance(item, bytes) or not item:
      self.done = True
    if isinstance(item, OSError) and not isinstance(item, EOFError):
      raise item
    if isinstance(item, Exception):
      raise FormatError("decode", f"cannot decompress: {item}")
    return item

  def close(self):
    self.file.close()
    if self.xz:
      self.stop.set()


class _BytesSource:
  readinto = None

  def __init__(self, data: bytes):
    self.size = len(data)
    self.data = data

  def read(self) -> bytes:
    data, self.data = self.data, b""
    return data

  def close(self):
    pass


class _Outputs:
  """The scanner's output arrays (capacities grow when one video needs)."""

  def __init__(self, videos, rows, boxes):
    self.vid_tok = np.zeros((videos, 2), np.int64)
    self.vid_val = np.zeros((videos, 2), np.int64)
    self.vid_list = np.zeros(videos, np.bool_)
    self.vid_rows = np.zeros(videos + 1, np.int64)
    self.pspan = np.zeros((rows, 2), np.int64)
    self.pflag = np.zeros(rows, np.uint8)
    self.name_tok = np.zeros((rows, 3, 2), np.int64)
    self.score = np.zeros(rows)
    self.dur = np.zeros((rows, 2))
    self.dflags = np.zeros(rows, np.uint8)
    self.traj = np.zeros((rows, 2, 2), np.int64)
    self.boxes = np.zeros(4 * boxes)
    self.counts = np.zeros(3, np.int64)

  def grown(self):
    return _Outputs(2 * len(self.vid_list), 2 * len(self.score), len(self.boxes) // 2)

  def with_boxes(self, boxes):
    """These outputs writing their boxes to `boxes` (a 1-d float64 view) instead."""
    out = copy.copy(self)
    out.boxes = boxes
    return out

  def args(self):
    return (
      self.vid_tok,
      self.vid_val,
      self.vid_list,
      self.vid_rows,
      self.pspan,
      self.pflag,
      self.name_tok,
      self.score,
      self.dur,
      self.dflags,
      self.traj,
      self.boxes,
      self.counts,
    )


def _position(buf, base, pos):
  """'byte N' (+ line and column when the window starts the document)."""
  where = f"byte {base + pos}"
  if base == 0:
    head = buf[:pos].tobytes()
    line = head.count(b"\n") + 1
    col = len(head) - (head.rfind(b"\n") + 1) + 1
    where += f" (line {line}, column {col})"
  return where


def _chunk(buf, base, out, vocab, detach=False):
  nv, npred, nbox = (int(x) for x in out.counts)
  tok = out.vid_tok[:nv]
  video_ids = [_decode_token(buf[s:e].tobytes()) for s, e in tok.tolist()]
  flag = out.pflag[:npred]
  plain = flag != IRREGULAR
  names = np.full((npred, 3), -1, np.int64)
  triplet = np.full(npred, -1, np.int64)
  if plain.any():
    ntok = out.name_tok[:npred][plain].reshape(-1, 2)
    ids, reps, collision = json_scan.name_ids(buf, ntok)
    if collision:  # a 64-bit hash collision: decode every token
      ids = np.asarray(
        [vocab.name_id(_decode_token(buf[s:e].tobytes())) for s, e in ntok.tolist()], np.int64
      )
    else:
      glob = np.asarray(
        [
          vocab.name_id(_decode_token(buf[ntok[r, 0] : ntok[r, 1]].tobytes()))
          for r in reps.tolist()
        ],
        np.int64,
      )
      ids = glob[ids]
    ids = ids.reshape(-1, 3)
    names[plain] = ids
    triplet[plain] = vocab.triplet_ids(ids)
  raw = None
  if detach:
    raw = {
      r: buf[out.pspan[r, 0] : out.pspan[r, 1]].tobytes() for r in np.flatnonzero(flag).tolist()
    }
    buf = None
  return Chunk(
    raw=raw,
    buf=buf,
    base=base,
    video_ids=video_ids,
    is_list=out.vid_list[:nv],
    value_span=out.vid_val[:nv],
    rows=out.vid_rows[: nv + 1],
    span=out.pspan[:npred],
    flag=flag,
    triplet=triplet,
    names=names,
    score=out.score[:npred],
    duration=out.dur[:npred],
    flags=out.dflags[:npred],
    traj=out.traj[:npred],
    boxes=out.boxes[: 4 * nbox].reshape(-1, 4),
    vocab=vocab,
  )


def scan_document(
  source,
  groundtruth: bool = False,
  vocab: Vocabulary | None = None,
  window: int | None = None,
  detach: bool = False,
  capacity: tuple | None = None,
  unique_keys: bool = False,
  parallel: bool | None = None,
) -> Iterator[tuple[str, Any]]:
  """Events of a document, read window by window.

  Args:
    source: a file path (`.json` or `.json.xz`) or the bytes.
    groundtruth: the document is the GT mapping `{video_id: [instance]}`
      (instances with subject_tid / object_tid, no score); else a
      submission `{"results": {video_id: [record]}, ...}`.
    vocab: the `Vocabulary` to extend (a new one by default).
    window: initial window size in bytes (default `WINDOW`).
    detach: chunks do not refer to the window (`Chunk.raw`) and their
      arrays stay valid until three more chunks have been yielded (and
      the scan that follows them is written elsewhere), so a consumer thread
      may work on one while the next ones are scanned.
    capacity: initial (videos, records, boxes) of the output arrays
      (default `capacity_for` the document's size; they grow as needed).
    unique_keys: refuse (FormatError "duplicate", before "end") a
      submission that repeats a video id within a "results" object or a
      top-level key, as `io.load_submission` does; by default a repeated
      key keeps the last value, as json.load.
    parallel: scan each window's second half in a second thread while this
      one scans the first (default: when this process may use 2 or more
      CPUs). The events are the same; chunks may end at other videos.

  Yields:
    ("chunk", Chunk) whole videos; ("version", value) a top-level
    "version"; ("results_again", None) a later top-level "results" starts
    (json.load keeps the last: drop what came before); and last one of
    ("end", kind) with kind 0 no "results", 1 an object, 2 another value;
    ("not_object", None) a top-level value that is not an object;
    ("annotation", None) GT mode: a top-level key of one annotation file
    ("trajectories", "subject/objects", "relation_instances", "video_id",
    "frame_count"; `annotations.load_groundtruth` reads such a file as an
    annotation, not as the GT mapping).

  Raises:
    FormatError: not UTF-8 / XZ, not JSON, nested too deeply, an integer
      json.loads refuses, or (unique_keys) a repeated key.
  """
  vocab = vocab or Vocabulary()
  src = (
    _BytesSource(bytes(source))
    if isinstance(source, (bytes, bytearray, memoryview))
    else _Source(source, BLOCK)
  )
  try:
    if parallel is None:
      parallel = _usable_cpus() > 1
    if capacity is None:
      capacity = capacity_for(src.size)
    events = _scan(src, groundtruth, vocab, window or WINDOW, detach, capacity, parallel)
    if unique_keys and not groundtruth:
      events = _unique_keys(events)
    for event in events:
      if event[0] != "key":
        yield event
  finally:
    src.close()


def _unique_keys(events):
  """`events`, raising FormatError("duplicate") before "end" if a video id
  repeats within a "results" object or a top-level key repeats. The keys
  are counted in the order `io._loads_submission` meets them (a repeated
  top-level key after the duplicates inside its value)."""
  dups, top, videos, pending = [], set(), set(), None
  for event in events:
    kind, value = event
    if kind == "chunk":
      for vid in value.video_ids:
        if vid in videos:
          dups.append(vid)
        videos.add(vid)
    elif kind == "key":
      if pending is not None:
        dups.append(pending)
      pending = value if value in top else None
      top.add(value)
    elif kind == "results_again":
      videos = set()
    elif kind == "end":
      if pending is not None:
        dups.append(pending)
      if dups:
        raise FormatError("duplicate", duplicate_message(dups, videos if value == 1 else ()))
    yield event


def _usable_cpus() -> int:
  """CPUs this process may run on (all of them where the OS has no affinity: macOS)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def _split(buf, pos, state, groundtruth):
  """Where a second thread may start scanning buf (see `_scan`), or -1."""
  if len(buf) - pos < SPLIT_MIN:
    return -1
  phase = int(state[0])
  inside = phase in (json_scan.P_RES_FIRST, json_scan.P_RES_KEY, json_scan.P_RES_NEXT)
  if groundtruth:
    inside = inside or phase == json_scan.P_START
  elif phase == json_scan.P_TOP_SEEN:  # only when the reported key is "results"
    inside = buf[pos : int(state[3])].tobytes() == b'"results"'
  if not inside:
    return -1
  return int(json_scan.split_point(buf, pos + (len(buf) - pos) // 2))


def _scan(src, groundtruth, vocab, window, detach, capacity, parallel=False):
  """`scan_document`'s events; see there.

  With `parallel`, a window with at least SPLIT_MIN bytes left to scan is
  cut at a likely boundary between two videos (`json_scan.split_point`): a
  second thread scans up to the cut ("head") while this one scans from it
  on ("tail"), as if it resumed between two videos of the results. The tail
  is kept only if the head stops exactly there, between two videos (then the
  tail's call is what one call from the start would have returned after the
  head's videos); otherwise the window is scanned again in one piece, so
  every event, error and position is the sequential scan's.
  """
  win = src.mapped(window) if src.readinto is not None else None
  filled = pos = base = 0
  pending = b""
  eof = False
  share = False  # the tail writes its boxes into the head's array (see below)
  if win is not None:  # the whole file, mapped
    filled, eof = len(win), True
    share = not detach
  else:
    win = np.empty(window, np.uint8)
  state = np.zeros(5, np.int64)
  # Outputs in use at once: the scans being written (2 in parallel) and,
  # detached, the chunk a consumer thread works on and the one it has queued.
  outs = [_Outputs(*capacity) for _ in range((2 if parallel else 1) + (2 if detach else 0))]
  turn = 0
  pool = None
  misses = 0  # cuts not kept: after MAX_MISSES, the rest is scanned in one thread
  try:
    while True:
      # Fill the window.
      while filled < len(win) and not eof:
        if not pending and src.readinto is not None:
          k = src.readinto(memoryview(win)[filled:])
          if not k:
            eof = True
          filled += k
          continue
        if not pending:
          pending = memoryview(src.read())
          if not pending:
            eof = True
            break
        k = min(len(pending), len(win) - filled)
        win[filled : filled + k] = np.frombuffer(pending, np.uint8, k)
        pending = pending[k:]
        filled += k
      final = eof and not pending
      buf = win[:filled]
      out = outs[turn]
      code = None
      split = _split(buf, pos, state, groundtruth) if parallel and misses < MAX_MISSES else -1
      if split > 0:
        if pool is None:
          pool = ThreadPoolExecutor(1, thread_name_prefix="scan_head")
        other = outs[(turn + 1) % len(outs)]
        head_args = out.args()
        if share:
          # One window and chunks not kept past the next scan: the tail's boxes go right after
          # the most the head can write (a box takes >= 9 bytes), so both chunks' boxes are
          # views of one array and `concat_tables` joins them without a copy.
          cut = 4 * ((split - pos) // 9 + 1)
          if cut < len(out.boxes):
            other = other.with_boxes(out.boxes[cut:])
            head_args = head_args[:-2] + (out.boxes[:cut], head_args[-1])
        head = state.copy()
        future = pool.submit(
          json_scan.scan_window, buf[:split], False, groundtruth, head, pos, *head_args
        )
        resumed = state.copy()  # between two videos of an object "results"
        resumed[0], resumed[4] = json_scan.P_RES_KEY, 1
        try:
          tail_code, tail_pos = json_scan.scan_window(
            buf, final, groundtruth, resumed, split, *other.args()
          )
        finally:
          head_code, head_pos = future.result()
        if (
          int(head_code) == json_scan.MORE
          and int(head_pos) == split
          and int(head[0]) == json_scan.P_RES_KEY
        ):
          if out.counts[0]:
            yield "chunk", _chunk(buf, base, out, vocab, detach)
          if head[1] >= 0:
            yield "version", json.loads(buf[head[1] : head[2]].tobytes())
          state[:] = resumed
          turn = (turn + 1) % len(outs)
          out = other
          code, newpos = int(tail_code), int(tail_pos)
        else:
          misses += 1
      if code is None:
        code, newpos = json_scan.scan_window(buf, final, groundtruth, state, pos, *out.args())
        code, newpos = int(code), int(newpos)
      if out.counts[0]:
        yield "chunk", _chunk(buf, base, out, vocab, detach)
        turn = (turn + 1) % len(outs)
      if state[1] >= 0:
        yield "version", json.loads(buf[state[1] : state[2]].tobytes())
      if code == json_scan.TOP_KEY:
        yield "key", _decode_token(buf[newpos : state[3]].tobytes())
        pos = newpos
        continue
      if code == json_scan.DONE:
        yield "end", int(state[4])
        return
      if code == json_scan.NOT_OBJECT:
        yield "not_object", None
        return
      if code == json_scan.TRAJECTORIES:
        yield "annotation", None
        return
      if code in (json_scan.INVALID, json_scan.TOO_DEEP, json_scan.HUGE_INT):
        # json.load decodes the whole file first: a UTF-8 error anywhere
        # wins over a JSON error (the scanner checks UTF-8 only in strings).
        _utf8_error(src, buf, base, pending)
        where = _position(buf, base, newpos)
        if code == json_scan.TOO_DEEP:
          raise FormatError("deep", f"nesting deeper than {json_scan.MAX_DEPTH} levels at {where}")
        if code == json_scan.HUGE_INT:
          raise FormatError(
            "value",
            "an integer of more than "
            f"{json_scan.MAX_INT_DIGITS} digits (Python's limit "
            f"for integer string conversion) at {where}",
          )
        raise FormatError("json", f"invalid JSON at {where}")
      if code == json_scan.RESULTS_AGAIN:
        yield "results_again", None
        pos = newpos
        continue
      if code == json_scan.FULL:
        if not out.counts[0]:
          outs[turn] = out.grown()
        pos = newpos
        continue
      # MORE: keep the unscanned tail, read on (a larger window if one
      # video / member does not fit).
      if newpos == 0 and filled == len(win):
        grown = np.empty(2 * len(win), np.uint8)
        grown[:filled] = win[:filled]
        win = grown
      elif newpos:
        tail = filled - newpos
        win[:tail] = win[newpos:filled].copy() if tail > newpos else win[newpos:filled]
        base += newpos
        filled = tail
      pos = 0
  finally:
    if pool is not None:
      pool.shutdown(wait=True)


def _utf8_error(src, buf, base, pending):
  """Raises FormatError("decode") at the first byte of this window and the
  rest of the document that is not UTF-8."""
  offset, tail = base, b""
  data = buf.tobytes()
  while True:
    chunk = tail + data
    status, at = json_scan.utf8_check(np.frombuffer(chunk, np.uint8))
    at = int(at)
    if status == 1:
      raise FormatError(
        "decode", f"'utf-8' codec can't decode byte 0x{chunk[at]:02x} at byte {offset + at}"
      )
    offset += at
    tail = chunk[at:]
    data, pending = (pending, b"") if pending else (src.read(), b"")
    if not data:
      if tail:
        raise FormatError(
          "decode",
          f"'utf-8' codec can't decode byte "
          f"0x{tail[0]:02x} at byte {offset}: unexpected "
          "end of data",
        )
      return


def record_values(rec) -> tuple | None:
  """(triplet, score, start, end, flags, sub_traj, obj_traj) of a decoded
  record the scorer can read, None if it cannot (not an object, a field
  missing or of the wrong type). Trajectories stay Python lists."""
  if not isinstance(rec, dict):
    return None
  t, d = rec.get("triplet"), rec.get("duration")
  if (
    not isinstance(t, list)
    or not all(isinstance(x, str) for x in t)
    or not isinstance(d, list)
    or len(d) != 2
    or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in d)
  ):
    return None
  s = rec.get("score", 0.0)
  if isinstance(s, bool) or not isinstance(s, (int, float)):
    return None
  if "sub_traj" not in rec or "obj_traj" not in rec:
    return None
  return (
    tuple(t),
    s,
    d[0],
    d[1],
    columns.duration_flags(d[0], d[1]),
    rec["sub_traj"],
    rec["obj_traj"],
  )


def chunk_table(
  chunk: Chunk, records: dict | None = None, copy: bool = False
) -> columns.RelationTable:
  """The chunk's list-valued videos as a `RelationTable`.

  Args:
    chunk: a `Chunk`.
    records: {row: decoded record} for irregular rows (default: decoded
      here); a row whose record the scorer cannot read gets a triplet that
      matches nothing and invalid trajectories (the validator refuses it).
    copy: copy the arrays (they are reused by the next chunk otherwise).

  Returns:
    The table; `py_scores` holds integer scores.
  """
  vocab = chunk.vocab
  irregular = np.flatnonzero(chunk.flag == IRREGULAR)
  triplet = chunk.triplet.copy()
  score, duration, flags = chunk.score, chunk.duration, chunk.flags
  offset = np.ascontiguousarray(chunk.traj[:, :, 0])
  length = np.ascontiguousarray(chunk.traj[:, :, 1])
  boxes = chunk.boxes
  py_scores = None
  if len(irregular):
    score, duration, flags = score.copy(), duration.copy(), flags.copy()
    offset, length = offset.copy(), length.copy()
    store = columns.TrajectoryStore()
    py_scores = {}
    for r in irregular.tolist():
      rec = records[r] if records is not None and r in records else (chunk.decode(r))
      vals = record_values(rec)
      if vals is None:
        triplet[r] = vocab.triplet_id(("<unreadable record>",))
        score[r], duration[r], flags[r] = 0.0, (0.0, 0.0), 0
        offset[r], length[r] = (0, 0), (-1, -1)
        continue
      t, s, start, end, f, sub, obj = vals
      triplet[r] = vocab.triplet_id(t)
      score[r] = float(s)
      if isinstance(s, int):
        py_scores[r] = s
      duration[r] = (float(start), float(end))
      flags[r] = f
      for side, traj in enumerate((sub, obj)):
        o, n = store.add(traj)
        offset[r, side] = o + len(boxes) if n >= 0 else 0
        length[r, side] = n
    boxes = np.concatenate([boxes, store.boxes()])
  table = columns.RelationTable(
    video_ids=list(chunk.video_ids),
    bounds=chunk.rows,
    triplets=vocab.triplets,
    triplet=triplet,
    score=score,
    duration=duration,
    flags=flags,
    boxes=boxes,
    offset=offset,
    length=length,
    exact_ints=True,
    py_scores=py_scores or None,
  )
  if copy:
    table = dataclasses.replace(
      table,
      score=table.score.copy(),
      duration=table.duration.copy(),
      flags=table.flags.copy(),
      boxes=table.boxes.copy(),
      offset=table.offset.copy(),
      length=table.length.copy(),
    )
  table.bounds = table.bounds.copy()
  return table


def _shared_boxes(parts: list):
  """(boxes, [first box of each part in it]) when the parts' boxes are C-contiguous views of
  one float64 array, at whole boxes; else None."""
  root = parts[0].boxes.base if len(parts) > 1 else None
  if not isinstance(root, np.ndarray) or root.dtype != np.float64 or root.ndim != 1:
    return None
  if not root.flags.c_contiguous or len(root) % 4:
    return None
  start = root.ctypes.data
  firsts, end = [], 0
  for p in parts:
    b = p.boxes
    if b.base is not root or b.dtype != np.float64 or not b.flags.c_contiguous:
      return None
    at = b.ctypes.data - start
    if at % 32 or b.shape[1:] != (4,):
      return None
    firsts.append(at // 32)
    end = max(end, at // 32 + len(b))
  return root.reshape(-1, 4)[:end], np.asarray(firsts, np.int64)


def concat_tables(parts: list, order: dict | None = None) -> columns.RelationTable:
  """One table of `parts` (tables sharing one triplet list).

  Args:
    parts: `RelationTable`s.
    order: {video_id: (part, video index in part)}: the videos to keep, in
      this order (default: all, in order).

  Returns:
    The table; triplet ids compacted to the triplets used, in first
    occurrence order.
  """
  if order is None:
    order = {}
    for k, part in enumerate(parts):
      for j, vid in enumerate(part.video_ids):
        order[vid] = (k, j)
  if len(parts) == 1 and list(order.values()) == [(0, j) for j in range(len(parts[0].video_ids))]:
    # One part in its own order: no copy, only the triplet ids compacted.
    part = parts[0]
    uniq, first, inverse = np.unique(part.triplet, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[by_first] = np.arange(len(uniq))
    return dataclasses.replace(
      part,
      video_ids=list(order),
      triplets=[part.triplets[u] for u in uniq[by_first].tolist()],
      triplet=rank[inverse.reshape(-1)],
    )
  row_base = np.cumsum([0] + [len(p) for p in parts])
  shared = _shared_boxes(parts)
  if shared is not None:  # views of one array (a mapped GT scanned in two threads): no copy
    boxes, box_base = shared
  else:
    boxes = np.concatenate([p.boxes for p in parts]) if parts else np.zeros((0, 4))
    box_base = np.cumsum([0] + [len(p.boxes) for p in parts])
  sel, counts = [], []
  for k, j in order.values():
    b = parts[k].bounds
    sel.append(np.arange(b[j], b[j + 1]) + row_base[k])
    counts.append(int(b[j + 1] - b[j]))
  sel = np.concatenate(sel) if sel else np.zeros(0, np.int64)

  def cat(name):
    return (
      np.concatenate([getattr(p, name) for p in parts])
      if parts
      else (getattr(columns.RelationTable.empty(), name))
    )

  offset = (
    np.concatenate([p.offset + box_base[k] for k, p in enumerate(parts)])
    if parts
    else np.zeros((0, 2), np.int64)
  )
  py = {}
  for k, p in enumerate(parts):
    for r, s in (p.py_scores or {}).items():
      py[int(r + row_base[k])] = s
  triplet = cat("triplet")[sel]
  triplets = parts[0].triplets if parts else []
  uniq, first, inverse = np.unique(triplet, return_index=True, return_inverse=True)
  rank = np.empty(len(uniq), np.int64)
  rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
  new_pos = {int(r): i for i, r in enumerate(sel.tolist())} if py else {}
  return columns.RelationTable(
    video_ids=list(order),
    bounds=columns._bounds(counts),  # pylint: disable=protected-access
    triplets=[triplets[u] for u in uniq[np.argsort(first, kind="stable")].tolist()],
    triplet=rank[inverse.reshape(-1)],
    score=cat("score")[sel],
    duration=cat("duration")[sel],
    flags=cat("flags")[sel],
    boxes=boxes,
    offset=offset[sel],
    length=cat("length")[sel],
    exact_ints=True,
    py_scores={new_pos[r]: s for r, s in py.items() if r in new_pos} or None,
  )


def parse_table(data, groundtruth: bool = False, name: str = "<bytes>") -> columns.RelationTable:
  """A whole submission (or GT JSON) document -> `RelationTable`.

  Videos in `json.load`'s dict order (a repeated id: the last value at
  the first position); irregular records are decoded with `json.loads`.

  Args:
    data: the JSON bytes, or a file path (`.json` / `.json.xz`).
    groundtruth: the document is the GT mapping (see `scan_document`).
    name: used in messages.

  Raises:
    NotTabular: invalid JSON, no "results" object, a value that is not a
      list of records the scorer can read; the message says where.
  """
  vocab = Vocabulary()
  parts, order = [], {}
  try:
    for event, value in scan_document(data, groundtruth, vocab):
      if event == "chunk":
        bad = [value.video_ids[v] for v in np.flatnonzero(~value.is_list)]
        records = {}
        for r in np.flatnonzero(value.flag == IRREGULAR).tolist():
          records[r] = value.decode(r)
          if record_values(records[r]) is None:
            v = int(np.searchsorted(value.rows, r, side="right")) - 1
            raise NotTabular(
              f"{name}: video {value.video_ids[v]!r}, record "
              f"{r - int(value.rows[v])}: not a relation the "
              "scorer can read"
            )
        if bad:
          raise NotTabular(f"{name}: video {bad[0]!r}: not a list")
        parts.append(chunk_table(value, records, copy=True))
        for j, vid in enumerate(value.video_ids):
          order[vid] = (len(parts) - 1, j)
      elif event == "results_again":
        parts, order = [], {}
      elif event == "end":
        if value != 1 and not groundtruth:
          raise NotTabular(f"{name}: no top-level 'results' object")
      elif event in ("not_object", "annotation"):
        raise NotTabular(
          f"{name}: not a {{video_id: [...]}} mapping"
          if groundtruth
          else f"{name}: no top-level 'results' object"
        )
  except FormatError as e:
    raise NotTabular(f"{name}: {e.detail}") from None
  return concat_tables(parts, order)


def read_table(path: str, groundtruth: bool = False) -> columns.RelationTable:
  """`parse_table` of a `.json` / `.json.xz` file (see there)."""
  return parse_table(path, groundtruth, name=path)
