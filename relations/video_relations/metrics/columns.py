"""Relation instances of many videos as flat arrays (the scorer's input).

`RelationTable` holds ground truth or predictions column-wise: one row per
relation instance, grouped by video, every trajectory a slice of one [N, 4]
float64 box array. The scorer (`scoring.evaluate_tables`) reads only these
arrays, so a model's predictions (float64 box arrays already) are scored
without ever building the official nested lists; `scoring.evaluate` builds
tables from the official dicts and converts only the trajectories the
official code would read.

Builders:
  RelationTable.from_relations({video_id: [relation objects]})  model output
  RelationTable.from_dicts({video_id: [official dicts]})        GT / JSON
  TrajectoryStore                                     incremental box store
"""

import dataclasses
import itertools
from typing import Any, Mapping, Sequence

import numpy as np

from relations.video_relations.metrics import kernels

_chain = itertools.chain.from_iterable


class TrajectoryStore:
  """Appends trajectories (lists of [x1, y1, x2, y2]) into one float64 array."""

  def __init__(self, capacity: int = 1 << 14):
    self.buffer = np.empty((capacity, 4), np.float64)
    self.size = 0

  def add(self, boxes) -> tuple[int, int]:
    """Converts one trajectory; returns (offset, number of boxes).

    A value that is not a list of 4-number boxes gets the length -1: the
    official code fails only when it reads it (a pair with overlapping
    durations), and the scorer reports it then. `buffer` may be
    reallocated (offsets stay valid).
    """
    try:
      n = len(boxes)
      # Every box must have 4 numbers (a 3- and a 5-number box would
      # flatten to 8 values and shift the rest).
      if n and set(map(len, boxes)) != {4}:
        return 0, -1
      # fromiter over the flattened boxes is the fastest exact conversion
      # from Python numbers (ints convert exactly below 2**53).
      arr = np.fromiter(_chain(boxes), np.float64, count=4 * n)
    except (TypeError, ValueError):
      return 0, -1
    offset = self.size
    if offset + n > len(self.buffer):
      grown = np.empty((max(2 * len(self.buffer), offset + n), 4))
      grown[:offset] = self.buffer[:offset]
      self.buffer = grown
    self.buffer[offset : offset + n] = arr.reshape(n, 4)
    self.size += n
    return offset, n

  def boxes(self) -> np.ndarray:
    """[N, 4] float64, all boxes added so far (a view of `buffer`)."""
    return self.buffer[: self.size]


def duration_flags(start, end) -> int:
  """START_INT | END_INT bits: which bounds are Python ints (not bools)."""
  f = 0
  if isinstance(start, (int, np.integer)) and not isinstance(start, bool):
    f |= kernels.START_INT
  if isinstance(end, (int, np.integer)) and not isinstance(end, bool):
    f |= kernels.END_INT
  return f


@dataclasses.dataclass
class RelationTable:
  """Relation instances of V videos, R rows, N boxes.

  Attributes:
    video_ids: [V] video ids.
    bounds: [V+1] int64, rows of video v are bounds[v]:bounds[v+1].
    triplets: distinct (subject, predicate, object) tuples.
    triplet: [R] int64 index into `triplets`.
    score: [R] float64 (ground truth: 0).
    duration: [R, 2] float64 native frames [start, end).
    flags: [R] uint8 `kernels.START_INT | kernels.END_INT` where the bound is
      an integer (array builders: both).
    boxes: [N, 4] float64 (x1, y1, x2, y2) inclusive pixel corners.
    offset, length: [R, 2] int64, the (subject, object) trajectories are
      boxes[offset:offset + length]; length -1: not a valid box list.
    exact_ints: coordinates may be integers the official code keeps as
      Python ints (JSON input): the scorer then refuses trajectories whose
      sum of |area| reaches 2**53, where float64 would round.
    index: None, or [R] int64: each row's index in its video's submission
      list (for messages, when rows were filtered or rearranged).
    py_scores: None, or {row: Python int}: scores that are integers in the
      submission (the official integer-array semantics depend on it).
  """

  video_ids: list
  bounds: np.ndarray
  triplets: list
  triplet: np.ndarray
  score: np.ndarray
  duration: np.ndarray
  flags: np.ndarray
  boxes: np.ndarray
  offset: np.ndarray
  length: np.ndarray
  exact_ints: bool = False
  index: np.ndarray | None = None
  py_scores: dict | None = None

  def __len__(self):
    return len(self.triplet)

  def video_rows(self, index: int) -> slice:
    return slice(int(self.bounds[index]), int(self.bounds[index + 1]))

  @classmethod
  def empty(cls) -> "RelationTable":
    """A table without videos."""
    return cls(
      video_ids=[],
      bounds=np.zeros(1, np.int64),
      triplets=[],
      triplet=np.zeros(0, np.int64),
      score=np.zeros(0),
      duration=np.zeros((0, 2)),
      flags=np.zeros(0, np.uint8),
      boxes=np.zeros((0, 4)),
      offset=np.zeros((0, 2), np.int64),
      length=np.zeros((0, 2), np.int64),
    )

  def select_rows(self, keep: np.ndarray) -> "RelationTable":
    """The rows where `keep` [R] bool, videos left without rows dropped.

    Boxes are shared (offsets still point into `boxes`); `index` keeps each
    row's original position in its video.
    """
    kept = np.zeros(len(keep) + 1, np.int64)
    np.cumsum(keep, out=kept[1:])
    counts = kept[self.bounds[1:]] - kept[self.bounds[:-1]]
    index = self.index
    if index is None:
      index = np.arange(len(keep)) - np.repeat(self.bounds[:-1], np.diff(self.bounds))
    rows = np.flatnonzero(keep)
    videos = np.flatnonzero(counts)
    py = None
    if self.py_scores:
      new = {int(r): k for k, r in enumerate(rows.tolist())}
      py = {new[r]: s for r, s in self.py_scores.items() if r in new}
    return dataclasses.replace(
      self,
      video_ids=[self.video_ids[v] for v in videos.tolist()],
      bounds=_bounds(counts[videos]),
      triplet=self.triplet[rows],
      score=self.score[rows],
      duration=self.duration[rows],
      flags=self.flags[rows],
      offset=self.offset[rows],
      length=self.length[rows],
      index=index[rows],
      py_scores=py,
    )

  @classmethod
  def from_relations(cls, results: Mapping[str, Sequence[Any]]) -> "RelationTable":
    """Table of model relations without building nested lists.

    Args:
      results: {video_id: [relation]}, each relation with attributes
        `triplet` (3 names), `score`, `start`, `end` (native frames, end
        exclusive) and `sub_traj`, `obj_traj` ([end - start, 4] boxes), e.g.
        `relations.video_relations.inference.association.Relation`.

    Returns:
      The table, rows in the given order.
    """
    rels = [r for rs in results.values() for r in rs]
    vocab = {}
    triplet = [vocab.setdefault(tuple(r.triplet), len(vocab)) for r in rels]
    # Interleaved (subject, object) trajectories; concatenated in one call.
    trajs = [t for r in rels for t in (r.sub_traj, r.obj_traj)]
    lengths = np.fromiter(map(len, trajs), np.int64, len(trajs))
    offsets = np.cumsum(lengths) - lengths
    boxes = (
      np.concatenate(trajs, axis=0).astype(np.float64, copy=False).reshape(-1, 4)
      if trajs
      else np.zeros((0, 4))
    )
    if len(boxes) != lengths.sum():
      raise ValueError("sub_traj / obj_traj must be [n, 4] box arrays")
    return cls(
      video_ids=list(results),
      bounds=_bounds([len(rs) for rs in results.values()]),
      triplets=list(vocab),
      triplet=np.asarray(triplet, np.int64),
      score=np.fromiter((r.score for r in rels), np.float64, len(rels)),
      duration=np.asarray([(r.start, r.end) for r in rels], np.float64).reshape(-1, 2),
      flags=np.full(len(rels), kernels.START_INT | kernels.END_INT, np.uint8),
      boxes=boxes,
      offset=offsets.reshape(-1, 2),
      length=lengths.reshape(-1, 2),
    )

  @classmethod
  def from_dicts(cls, results: Mapping[str, Sequence[Mapping]]) -> "RelationTable":
    """Table of official-format relations (GT or `results` of a submission).

    Every trajectory is converted (~0.1 us per box); use it for data that
    is scored many times (e.g. the ground truth of a training run).
    Records must be well formed (run the validator first); a trajectory that
    is not a list of 4-number boxes is marked with length -1.
    """
    vocab, triplet, score, dur, flags, counts = {}, [], [], [], [], []
    store = TrajectoryStore()
    offs, lens = [], []
    for rels in results.values():
      counts.append(len(rels))
      for r in rels:
        triplet.append(vocab.setdefault(tuple(r["triplet"]), len(vocab)))
        score.append(r.get("score", 0.0))
        d = r["duration"]
        dur.append((d[0], d[1]))
        flags.append(duration_flags(d[0], d[1]))
        for key in ("sub_traj", "obj_traj"):
          o, n = store.add(r[key])
          offs.append(o)
          lens.append(n)
    return cls(
      video_ids=list(results),
      bounds=_bounds(counts),
      triplets=list(vocab),
      triplet=np.asarray(triplet, np.int64),
      score=np.asarray(score, np.float64),
      duration=np.asarray(dur, np.float64).reshape(-1, 2),
      flags=np.asarray(flags, np.uint8),
      boxes=store.boxes(),
      offset=np.asarray(offs, np.int64).reshape(-1, 2),
      length=np.asarray(lens, np.int64).reshape(-1, 2),
      exact_ints=True,
    )


def _bounds(counts):
  out = np.zeros(len(counts) + 1, np.int64)
  np.cumsum(counts, out=out[1:])
  return out
