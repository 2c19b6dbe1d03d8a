"""Video relation detection / tagging scores, exactly as the official tools.

Protocols:
  "helper": xdshang/VidVRD-helper `evaluation/visual_relation_detection.py`
            (papers, VRU'19): all predictions, raw floats.
  "vru20":  NExTplusplus/VidVRD-helper `evaluation/video_relation_detection.py`
            (VRU'20/'21 server): top 200 predictions per video after the
            stable score sort, every metric `round(float(x), 4)`.

`evaluate(groundtruth, prediction)` takes the official in-memory formats:
groundtruth `{video_id: [{triplet, duration, sub_traj, obj_traj, ...}]}` and
prediction `{video_id: [{triplet, score, duration, sub_traj, obj_traj}]}`
(the submission's `results`). Per video: stable descending
score sort; greedy matching in that order against not-yet-detected GT of the
identical triplet, `min(sub vIoU, obj vIoU) >= 0.5`, first GT wins ties;
a matched prediction with a non-finite score still consumes its GT but counts
as a false positive (the official `isfinite(hit_scores)`); VOC all-points AP;
mAP is the plain mean over videos with >= 1 GT; R@N is micro-averaged;
tagging P@k is read at min(k, #unique triplets).

`evaluate_tables(gt_table, pred_table)` scores `columns.RelationTable`s
(flat arrays, e.g. a model's predictions) with the same rules.

Work: the compiled matcher (`kernels.match`) evaluates only
the pairs the official loop evaluates (same triplet, GT not yet detected)
and reads boxes only where the durations overlap; from dicts, only the
trajectories of same-triplet pairs with overlapping durations are converted
to arrays (the official code never reads the others either).

Anything the official code cannot score raises `ScoringError` naming the
video, the prediction (submission index) and the field.
"""

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import kernels
from relations.video_relations.metrics import metrics

PROTOCOLS = ("helper", "vru20")
VRU20_TOP = 200
DET_NRETURNS = (50, 100)
TAG_NRETURNS = (1, 5, 10)
METRIC_KEYS = ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")


class ScoringError(ValueError):
  """Input the official scorer cannot score (it would raise)."""


@dataclasses.dataclass
class Result:
  """Scores of one evaluation.

  Values have the official types: mAP np.float64, R@N np.float32, P@k the
  mean of np.float32 / 0. values (helper), or Python floats rounded to 4
  decimals (vru20). `as_dict()` gives plain floats.
  """

  mean_ap: Any
  rec_at_n: dict
  mprec_at_n: dict
  video_ap: dict
  num_videos: int
  num_gt: int

  def as_dict(self) -> dict[str, float]:
    out = {"mAP": float(self.mean_ap)}
    for n in DET_NRETURNS:
      out[f"R@{n}"] = float(self.rec_at_n[n])
    for k in TAG_NRETURNS:
      out[f"P@{k}"] = float(self.mprec_at_n[k])
    return out

  def official_lines(self) -> list[str]:
    """The six lines the official scripts print, with the same formatting."""
    return [
      f"detection mean AP (used in challenge): {self.mean_ap}",
      f"detection recall@50: {self.rec_at_n[50]}",
      f"detection recall@100: {self.rec_at_n[100]}",
      f"tagging precision@1: {self.mprec_at_n[1]}",
      f"tagging precision@5: {self.mprec_at_n[5]}",
      f"tagging precision@10: {self.mprec_at_n[10]}",
    ]


def _where(vid, index, field):
  return f"video {vid!r}, prediction {index}, field {field!r}"


def _score_of(vid, i, pred):
  if not isinstance(pred, Mapping) or "score" not in pred:
    raise ScoringError(f"{_where(vid, i, 'score')}: missing")
  s = pred["score"]
  if isinstance(s, bool) or not isinstance(s, (int, float)):
    raise ScoringError(f"{_where(vid, i, 'score')}: not a number: {s!r}")
  return s


def _triplet_of(vid, i, rel, what="prediction"):
  t = rel.get("triplet") if isinstance(rel, Mapping) else None
  if not isinstance(t, (list, tuple)) or not all(isinstance(x, str) for x in t):
    raise ScoringError(f"video {vid!r}, {what} {i}, field 'triplet': not a list of strings: {t!r}")
  return tuple(t)


def _duration_of(vid, i, rel, what):
  d = rel.get("duration")
  if (
    not isinstance(d, (list, tuple))
    or len(d) < 2
    or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in d[:2])
  ):
    raise ScoringError(
      f"video {vid!r}, {what} {i}, field 'duration': expected [start, end] numbers, got {d!r}"
    )
  return float(d[0]), float(d[1]), columns.duration_flags(d[0], d[1])


@dataclasses.dataclass
class _Video:
  vid: str
  gts: list
  order: list  # submission indices in ranked order (after the cut)
  scores: Any  # ranked scores (list of Python numbers or float64)
  triplets: list  # ranked triplets
  tkeys: Any = None  # ranked triplet ids
  gt_tkeys: Any = None  # set of the GT triplet ids
  num_gt: int = 0
  matched: Any = None  # [len(order)] bool
  error: str | None = None  # the official scorer fails on this video


def _prepare(vid, gts, preds, top):
  if not isinstance(preds, (list, tuple)):
    raise ScoringError(f"video {vid!r}: predictions must be a list, got {type(preds).__name__}")
  scores = [_score_of(vid, i, p) for i, p in enumerate(preds)]
  # Python's sort on the same keys: the official stable descending order,
  # also for ties, ints mixed with floats, and NaN.
  order = sorted(range(len(preds)), key=scores.__getitem__, reverse=True)
  if top is not None:
    order = order[:top]
  return _Video(
    vid=vid,
    gts=gts,
    order=order,
    num_gt=len(gts),
    scores=[scores[i] for i in order],
    triplets=[_triplet_of(vid, i, preds[i]) for i in order],
  )


def _dict_inputs(videos, prediction):
  """Matcher inputs from the official dicts; boxes are converted on demand.

  The official loop reads the boxes of a (prediction, GT) pair only when the
  triplets are equal, the GT is not detected yet and the durations overlap;
  every trajectory starts NOT_LOADED and `load` converts the rows the
  matcher asks for. Fills `tkeys` / `gt_tkeys` of each video.

  Returns:
    (p_bounds, g_bounds, pred, gt, load) for `kernels.match`.
  """
  vocab = {}
  pk, pd, pf, p_src, p_bounds = [], [], [], [], [0]
  gk, gd, gf, g_src, g_bounds = [], [], [], [], [0]
  for v in videos:
    preds = prediction.get(v.vid, [])
    gt_t = [_triplet_of(v.vid, g, rel, "ground truth") for g, rel in enumerate(v.gts)]
    gk.extend(vocab.setdefault(t, len(vocab)) for t in gt_t)
    gt_set = set(gt_t)
    v.gt_tkeys = {vocab[t] for t in gt_set}
    v.tkeys = [vocab.setdefault(t, len(vocab)) for t in v.triplets]
    used = set()
    for pos, t in enumerate(v.triplets):
      if t not in gt_set:
        pk.append(-1)
        pd.append((0.0, 0.0))
        pf.append(0)
        p_src.append(None)
        continue
      i = v.order[pos]
      ps, pe, flags = _duration_of(v.vid, i, preds[i], "prediction")
      used.add(t)
      pk.append(vocab[t])
      pd.append((ps, pe))
      pf.append(flags)
      p_src.append(preds[i])
    for g, t in enumerate(gt_t):
      if t in used:
        s, e, flags = _duration_of(v.vid, g, v.gts[g], "ground truth")
      else:
        s, e, flags = 0.0, 0.0, 0  # never compared
      gd.append((s, e))
      gf.append(flags)
      g_src.append(v.gts[g])
    p_bounds.append(len(pk))
    g_bounds.append(len(gk))
  stores = (columns.TrajectoryStore(), columns.TrajectoryStore())

  def table(keys, durs, flags, store):
    n = len(keys)
    return {
      "key": np.asarray(keys, np.int64),
      "dur": np.asarray(durs, np.float64).reshape(-1, 2),
      "flags": np.asarray(flags, np.uint8),
      "boxes": store.buffer,
      "off": np.zeros((n, 2), np.int64),
      "len": np.full((n, 2), kernels.NOT_LOADED, np.int64),
    }

  pred = table(pk, pd, pf, stores[0])
  pred["rel"] = np.arange(len(pk), dtype=np.int64)
  gt = table(gk, gd, gf, stores[1])
  sources = (p_src, g_src)

  def load(which, row):
    t = (pred, gt)[which]
    rel = sources[which][row]
    for side, key in enumerate(("sub_traj", "obj_traj")):
      t["off"][row, side], t["len"][row, side] = stores[which].add(_get(rel, key))
    return stores[which].buffer

  return p_bounds, g_bounds, pred, gt, load


def _get(rel, key):
  return rel.get(key) if isinstance(rel, Mapping) else None


_CRASHES = {
  kernels.TYPE_ERROR: "a duration bound is not an integer (TypeError)",
  kernels.INDEX_ERROR: "its box list does not cover the frames shared by "
  "the two durations (IndexError)",
  kernels.ZERO_DIVISION: "the vIoU denominator is 0 (ZeroDivisionError)",
  kernels.BAD_TRAJECTORY: "a trajectory is not a list of [x1, y1, x2, y2] numbers",
  kernels.TOO_LARGE: "box areas sum to >= 2**53 within one trajectory: "
  "integer coordinates too large to score exactly",
}


def _run_matcher(videos, p_bounds, g_bounds, pred, gt, threshold, exact_ints, index_of, load=None):
  """Runs the matcher; fills `matched`, and `error` where it fails."""
  matched, crashes = kernels.match(threshold, p_bounds, g_bounds, pred, gt, exact_ints, load)
  for i, v in enumerate(videos):
    v.matched = matched[p_bounds[i] : p_bounds[i + 1]]
  for v, p, g, side, status in crashes:
    video = videos[v]
    field = "sub_traj" if side == 0 else "obj_traj"
    video.error = (
      f"{_where(video.vid, index_of(v, p - p_bounds[v]), field)}: the "
      f"official scorer fails evaluating it against ground truth {g}: "
      f"{_CRASHES[status]}"
    )


def evaluate(
  groundtruth: Mapping[str, Sequence[Mapping]],
  prediction: Mapping[str, Sequence[Mapping]],
  protocol: str = "helper",
  viou_threshold: float = 0.5,
) -> Result:
  """Relation detection mAP / R@50 / R@100 and tagging P@1 / P@5 / P@10.

  The dict path (official in-memory formats); the CLI reads files into
  tables and uses `TableEvaluation`, this stays as its test oracle.

  Args:
    groundtruth: {video_id: [GT relation instance]} (official GT format).
    prediction: {video_id: [prediction]} (the submission's "results").
    protocol: "helper" or "vru20" (see module docstring).
    viou_threshold: matching threshold (0.5 in both official tools).

  Returns:
    `Result` with the official values and types.

  Raises:
    ScoringError: input the official scorer could not score, e.g. no video
      with ground truth, (helper) no prediction at all in GT videos, a
      missing field, a box list too short for a needed frame; the first
      failing video in GT order is named, as the official code fails there.
  """
  if protocol not in PROTOCOLS:
    raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
  top = VRU20_TOP if protocol == "vru20" else None
  if not isinstance(prediction, Mapping):
    raise ScoringError("prediction: expected {video_id: [predictions]}")
  videos = []
  for vid, gts in groundtruth.items():
    if not isinstance(gts, (list, tuple)):
      raise ScoringError(f"ground truth of video {vid!r} is not a list")
    if len(gts) == 0:
      continue  # The official code skips the video and its predictions.
    videos.append(_prepare(vid, gts, prediction.get(vid, []), top))
  if not videos:
    raise ScoringError(_NO_GT)
  p_bounds, g_bounds, pred, gt, load = _dict_inputs(videos, prediction)
  _run_matcher(
    videos,
    p_bounds,
    g_bounds,
    pred,
    gt,
    viou_threshold,
    exact_ints=True,
    index_of=lambda v, pos: videos[v].order[pos],
    load=load,
  )
  return _aggregate([(v.vid, v.num_gt, _video_stats(v)) for v in videos], top)


_NO_GT = "no video has ground truth (the official scorer fails on np.concatenate([]))"


def evaluate_tables(
  groundtruth: columns.RelationTable,
  prediction: columns.RelationTable,
  protocol: str = "helper",
  viou_threshold: float = 0.5,
) -> Result:
  """`evaluate` on array tables (e.g. a model's predictions, no JSON).

  Same rules and numbers as `evaluate` on the equivalent dicts, with the
  scores taken as float64 (an official scorer fed Python floats) except
  rows listed in `prediction.py_scores`. Videos are those of `groundtruth`
  with >= 1 row, in its order; predictions of other videos are ignored.

  Args:
    groundtruth: GT table (`columns.RelationTable.from_dicts`).
    prediction: prediction table (`from_relations` or `from_dicts`).
    protocol, viou_threshold: as in `evaluate`.

  Returns:
    `Result`.

  Raises:
    ScoringError: as `evaluate`.
  """
  ev = TableEvaluation(groundtruth, protocol, viou_threshold)
  ev.add(prediction)
  return ev.result()


@dataclasses.dataclass
class _VideoStats:
  """What the aggregation needs of one scored video (or why it fails)."""

  ap: Any = None
  tp_at: dict | None = None  # {N: true positives in the top N}
  len_at: dict | None = None  # {N: min(N, number of ranked predictions)}
  tag: dict | None = None  # {k: tagging precision@k}
  error: str | None = None


class TableEvaluation:
  """`evaluate_tables` fed predictions in parts (e.g. read chunk by chunk).

  `add(table)` scores the videos of `table` that have ground truth (a
  video seen again replaces its earlier scores, as `json.load` keeps the
  last of a repeated key); `result()` aggregates in GT order, GT videos
  never added scoring as videos without predictions. Per-video numbers
  depend only on that video, so the parts may come in any order.

  Args:
    groundtruth: GT table.
    protocol, viou_threshold: as in `evaluate`.
    filter_predictions: keep only predictions whose triplet is a GT triplet
      (the xdshang zero-shot setting, with the zero-shot GT).
  """

  def __init__(
    self,
    groundtruth: columns.RelationTable,
    protocol: str = "helper",
    viou_threshold: float = 0.5,
    filter_predictions: bool = False,
  ):
    if protocol not in PROTOCOLS:
      raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    self.top = VRU20_TOP if protocol == "vru20" else None
    self.gt = groundtruth
    self.threshold = viou_threshold
    self.filter = filter_predictions
    # Triplets of the GT rows (a row selection may leave others listed).
    self.gt_vocab = {groundtruth.triplets[i]: i for i in np.unique(groundtruth.triplet).tolist()}
    self.gt_rows = {}
    for i, vid in enumerate(groundtruth.video_ids):
      rows = groundtruth.video_rows(i)
      if rows.stop > rows.start:
        self.gt_rows[vid] = rows
      else:
        self.gt_rows.pop(vid, None)
    self.stats = {}

  def add(self, prediction: columns.RelationTable) -> None:
    """Scores the videos of `prediction` that have ground truth."""
    items = []
    for j, vid in enumerate(prediction.video_ids):
      if vid in self.gt_rows:
        items.append((vid, np.arange(prediction.bounds[j], prediction.bounds[j + 1]), j))
    if items:
      self.stats.update(self._score(prediction, items))

  def result(self) -> Result:
    """The aggregated `Result`; raises `ScoringError` as `evaluate`."""
    if not self.gt_rows:
      raise ScoringError(_NO_GT)
    missing = [v for v in self.gt_rows if v not in self.stats]
    if missing:
      empty = columns.RelationTable.empty()
      self.stats.update(self._score(empty, [(v, np.zeros(0, np.int64), None) for v in missing]))
    return _aggregate(
      [(v, rows.stop - rows.start, self.stats[v]) for v, rows in self.gt_rows.items()], self.top
    )

  def _score(self, prediction, items):
    """{vid: _VideoStats} of items (vid, prediction rows, table video)."""
    top = self.top
    gt_table = self.gt
    n_gt_trip = len(gt_table.triplets)
    # GT triplet id of each predicted triplet id (-1: not in the GT), looked up only for the
    # ids these rows use: a streamed table shares one vocabulary that grows chunk by chunk.
    pmap = np.full(len(prediction.triplets), -1, np.int64)
    used = np.unique(prediction.triplet)
    used = used[used >= 0].tolist()
    triplets, gt_vocab = prediction.triplets, self.gt_vocab
    pmap[used] = [gt_vocab.get(triplets[u], -1) for u in used]
    videos, rows, gsel = [], [], []
    for vid, prows, _ in items:
      if self.filter and len(prows):
        prows = prows[pmap[prediction.triplet[prows]] >= 0]
      g = self.gt_rows[vid]
      videos.append(
        _Video(vid=vid, gts=None, order=None, scores=None, triplets=None, num_gt=g.stop - g.start)
      )
      rows.append(prows)
      gsel.append(np.arange(g.start, g.stop))
    py_scores = prediction.py_scores or {}
    ranked, p_bounds = _rank(prediction.score, rows, top, py_scores)
    gsel = np.concatenate(gsel)
    g_bounds = np.zeros(len(videos) + 1, np.int64)
    np.cumsum([v.num_gt for v in videos], out=g_bounds[1:])
    # One id space: GT triplets, then the other predicted ones.
    tkeys = prediction.triplet[ranked]
    mapped = pmap[tkeys] if len(pmap) else np.zeros(0, np.int64)
    tkeys = np.where(mapped >= 0, mapped, n_gt_trip + tkeys)
    gt_keys = gt_table.triplet[gsel]
    pred = {
      "key": np.where(tkeys < n_gt_trip, tkeys, -1),
      "rel": ranked,
      "dur": prediction.duration,
      "flags": prediction.flags,
      "boxes": prediction.boxes,
      "off": prediction.offset,
      "len": prediction.length,
    }
    gt = {
      "key": gt_keys,
      "dur": gt_table.duration[gsel],
      "flags": gt_table.flags[gsel],
      "boxes": gt_table.boxes,
      "off": gt_table.offset[gsel],
      "len": gt_table.length[gsel],
    }
    scores = prediction.score[ranked]
    for i, v in enumerate(videos):
      sl = slice(p_bounds[i], p_bounds[i + 1])
      v.scores = scores[sl].tolist()
      if py_scores:
        v.scores = [py_scores.get(r, s) for r, s in zip(ranked[sl].tolist(), v.scores)]
      v.tkeys = tkeys[sl].tolist()
      v.gt_tkeys = set(gt_keys[g_bounds[i] : g_bounds[i + 1]].tolist())

    def index_of(v, pos):
      row = int(ranked[p_bounds[v] + pos])
      if prediction.index is not None:
        return int(prediction.index[row])
      return row - int(prediction.bounds[items[v][2]])

    _run_matcher(
      videos,
      p_bounds,
      g_bounds,
      pred,
      gt,
      self.threshold,
      exact_ints=gt_table.exact_ints or prediction.exact_ints,
      index_of=index_of,
    )
    return {v.vid: _video_stats(v) for v in videos}


def _rank(score, rows, top, py_scores=None):
  """Ranked rows of each video: stable descending score, then the cut.

  py_scores: {row: Python number} overriding `score` (integer scores);
  videos with such rows or NaN scores are sorted by Python's `sorted`.

  Returns (ranked rows [P] int64, bounds [V+1] int64).
  """
  counts = np.asarray([len(r) for r in rows], np.int64)
  allrows = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
  video = np.repeat(np.arange(len(rows)), counts)
  s = score[allrows]
  # Stable ascending sort of -score == Python's stable descending sort
  # (ties keep the submission order) when there is no NaN.
  order = np.lexsort((-s, video))
  ranked = allrows[order]
  special = set(video[np.isnan(s)].tolist())
  if py_scores:
    special.update(
      video[np.isin(allrows, np.fromiter(py_scores, np.int64, len(py_scores)))].tolist()
    )
  starts = np.zeros(len(rows) + 1, np.int64)
  np.cumsum(counts, out=starts[1:])
  for v in sorted(special):
    # Python's sort (NaN keys are not a total order; ints compare exactly).
    r = rows[v]
    sv = [py_scores.get(x, y) if py_scores else y for x, y in zip(r.tolist(), score[r].tolist())]
    ranked[starts[v] : starts[v + 1]] = r[sorted(range(len(r)), key=sv.__getitem__, reverse=True)]
  if top is None:
    return ranked, starts
  pos = np.arange(len(ranked)) - np.repeat(starts[:-1], counts)
  keep = pos < top
  kept = np.minimum(counts, top)
  bounds = np.zeros(len(rows) + 1, np.int64)
  np.cumsum(kept, out=bounds[1:])
  return ranked[keep], bounds


def _video_stats(v):
  """Per-video AP, top-N hits and tagging precision (official numerics)."""
  if v.error is not None:
    return _VideoStats(error=v.error)
  finite = np.isfinite(np.asarray(v.scores, np.float64).reshape(-1))
  hits = v.matched & finite
  prec, rec = metrics.pr_curve(hits, v.num_gt)
  try:
    tag = metrics.tagging_precision(v.tkeys, v.scores, v.gt_tkeys, TAG_NRETURNS)
  except OverflowError:
    return _VideoStats(
      error=(
        f"video {v.vid!r}: all scores are integers and a predicted triplet "
        "is not in the ground truth; the official scorer fails assigning "
        "-inf into its integer score array"
      )
    )
  return _VideoStats(
    ap=metrics.voc_ap(rec, prec),
    tp_at={n: int(hits[:n].sum()) for n in DET_NRETURNS},
    len_at={n: min(n, hits.size) for n in DET_NRETURNS},
    tag=tag,
  )


def _aggregate(videos, top):
  """The official aggregation over (vid, num_gt, _VideoStats) in GT order.

  Raises the error of the first failing video (the official code fails
  there).
  """
  video_ap = {}
  tp_at = {n: 0 for n in DET_NRETURNS}
  len_at = {n: 0 for n in DET_NRETURNS}
  prec_at = {k: [] for k in TAG_NRETURNS}
  tot_gt = 0
  for vid, num_gt, st in videos:
    if st.error is not None:
      raise ScoringError(st.error)
    tot_gt += num_gt
    video_ap[vid] = st.ap
    for n in DET_NRETURNS:
      tp_at[n] += st.tp_at[n]
      len_at[n] += st.len_at[n]
    for k in TAG_NRETURNS:
      prec_at[k].append(st.tag[k])

  mean_ap = np.mean(list(video_ap.values()))
  rec_at_n = {}
  for n in DET_NRETURNS:
    if len_at[n] == 0 and top is None:
      raise ScoringError(
        "no video with ground truth has any prediction: the helper scorer "
        "fails here (IndexError on an empty recall list); the vru20 "
        "protocol scores it as 0"
      )
    rec_at_n[n] = metrics.recall_at(tp_at[n], tot_gt) if len_at[n] else 0.0
  mprec_at_n = {k: np.mean(prec_at[k]) for k in TAG_NRETURNS}
  if top is not None:
    mean_ap = round(float(mean_ap), 4)
    rec_at_n = {n: (round(float(x), 4) if len_at[n] else 0.0) for n, x in rec_at_n.items()}
    mprec_at_n = {k: round(float(x), 4) for k, x in mprec_at_n.items()}
  return Result(
    mean_ap=mean_ap,
    rec_at_n=rec_at_n,
    mprec_at_n=mprec_at_n,
    video_ap=video_ap,
    num_videos=len(videos),
    num_gt=tot_gt,
  )


def zero_shot_triplets(groundtruth, train_groundtruth) -> set:
  """Triplets of `groundtruth` that never occur in `train_groundtruth`."""

  def triplets(gt):
    return {tuple(r["triplet"]) for rels in gt.values() for r in rels}

  return triplets(groundtruth) - triplets(train_groundtruth)


def zero_shot_split(groundtruth, prediction, zs_triplets, generalized):
  """GT/prediction dicts of the zero-shot evaluations.

  Keeps only zero-shot GT instances and only videos that have one. With
  `generalized=False` (xdshang `evaluate.py`) predictions are filtered to
  zero-shot triplets too; with `generalized=True` (NExTplusplus
  `evaluate.py`, generalised zero-shot) all predictions of those videos stay.
  """
  gt, pred = {}, {}
  for vid, rels in groundtruth.items():
    zs = [r for r in rels if tuple(r["triplet"]) in zs_triplets]
    if zs:
      gt[vid] = zs
      preds = prediction.get(vid, [])
      pred[vid] = (
        list(preds) if generalized else [r for r in preds if tuple(r["triplet"]) in zs_triplets]
      )
  return gt, pred
