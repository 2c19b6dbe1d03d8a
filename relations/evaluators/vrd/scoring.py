"""Video relation detection / tagging scores, exactly as the official tools.

Protocols (spec 1.6):
  "helper": xdshang/VidVRD-helper `evaluation/visual_relation_detection.py`
            (papers, VRU'19): all predictions, raw floats.
  "vru20":  NExTplusplus/VidVRD-helper `evaluation/video_relation_detection.py`
            (VRU'20/'21 server): top 200 predictions per video after the
            stable score sort, every metric `round(float(x), 4)`.

`evaluate(groundtruth, prediction)` takes the official in-memory formats:
groundtruth `{video_id: [{triplet, duration, sub_traj, obj_traj, ...}]}` and
prediction `{video_id: [{triplet, score, duration, sub_traj, obj_traj}]}`
(the submission's `results`). Per video (spec 1.3-1.5): stable descending
score sort; greedy matching in that order against not-yet-detected GT of the
identical triplet, `min(sub vIoU, obj vIoU) >= 0.5`, first GT wins ties;
a matched prediction with a non-finite score still consumes its GT but counts
as a false positive (the official `isfinite(hit_scores)`); VOC all-points AP;
mAP is the plain mean over videos with >= 1 GT; R@N is micro-averaged;
tagging P@k is read at min(k, #unique triplets).

Only the candidate pairs (same triplet) are converted to arrays: the
official code never reads the boxes of other predictions either.

Anything the official code cannot score raises `ScoringError` naming the
video, the prediction (submission index) and the field.
"""

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from relations.evaluators.vrd import kernels
from relations.evaluators.vrd import metrics
from relations.evaluators.vrd import overlaps

PROTOCOLS = ("helper", "vru20")
VRU20_TOP = 200
DET_NRETURNS = (50, 100)
TAG_NRETURNS = (1, 5, 10)
METRIC_KEYS = ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")

# Greedy-matching tensors ([videos, candidates, GT]) per batch.
_GREEDY_ENTRIES = 1 << 22
# Boxes converted per batch of videos (bounds memory).
_BOXES_PER_BATCH = 1 << 22


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
  if (not isinstance(t, (list, tuple))
      or not all(isinstance(x, str) for x in t)):
    raise ScoringError(f"video {vid!r}, {what} {i}, field 'triplet': "
                       f"not a list of strings: {t!r}")
  return tuple(t)


def _duration_of(vid, i, rel, what):
  d = rel.get("duration")
  if (not isinstance(d, (list, tuple)) or len(d) < 2
      or any(isinstance(x, bool) or not isinstance(x, (int, float))
             for x in d[:2])):
    raise ScoringError(f"video {vid!r}, {what} {i}, field 'duration': "
                       f"expected [start, end] numbers, got {d!r}")
  return (float(d[0]), float(d[1]),
          isinstance(d[0], int) and isinstance(d[1], int))


def _traj_of(vid, i, rel, key, what, store):
  t = rel.get(key)
  if not isinstance(t, (list, tuple)):
    raise ScoringError(f"video {vid!r}, {what} {i}, field {key!r}: "
                       f"expected a list of boxes, got {type(t).__name__}")
  try:
    return store.add(t)
  except (TypeError, ValueError) as e:
    raise ScoringError(f"video {vid!r}, {what} {i}, field {key!r}: boxes "
                       f"must be [x1, y1, x2, y2] numbers ({e})") from None


@dataclasses.dataclass
class _Video:
  vid: str
  gts: list
  order: list            # submission indices in ranked order (after the cut)
  scores: list           # ranked scores
  triplets: list         # ranked triplets
  cand_pos: list = dataclasses.field(default_factory=list)  # ranked positions
  matched: Any = None    # [len(order)] bool


def _prepare(vid, gts, preds, top):
  if not isinstance(preds, (list, tuple)):
    raise ScoringError(f"video {vid!r}: predictions must be a list, got "
                       f"{type(preds).__name__}")
  scores = [_score_of(vid, i, p) for i, p in enumerate(preds)]
  # Python's sort on the same keys: the official stable descending order,
  # also for ties, ints mixed with floats, and NaN.
  order = sorted(range(len(preds)), key=scores.__getitem__, reverse=True)
  if top is not None:
    order = order[:top]
  return _Video(vid=vid, gts=gts, order=order,
                scores=[scores[i] for i in order],
                triplets=[_triplet_of(vid, i, preds[i]) for i in order])


def _match_batch(batch, prediction, threshold):
  """Greedy matching for a batch of `_Video`s; fills `.matched`."""
  store = overlaps.TrajectoryStore()
  # Per trajectory-pair rows: (video slot, candidate slot, gt index).
  rows_v, rows_c, rows_g = [], [], []
  ta_s, tb_s, ta_o, tb_o = [], [], [], []
  dur_a, dur_b, int_a, int_b = [], [], [], []
  max_c = max_g = 0
  for slot, v in enumerate(batch):
    by_triplet = {}
    for g, rel in enumerate(v.gts):
      by_triplet.setdefault(_triplet_of(v.vid, g, rel, "ground truth"),
                            []).append(g)
    gt_traj, gt_dur = {}, {}
    preds = prediction.get(v.vid, [])
    c = 0
    for pos, t in enumerate(v.triplets):
      gl = by_triplet.get(t)
      if gl is None:
        continue
      i = v.order[pos]
      p = preds[i]
      ps, pe, pint = _duration_of(v.vid, i, p, "prediction")
      pa = po = None
      for g in gl:
        if g not in gt_dur:
          gt_dur[g] = _duration_of(v.vid, g, v.gts[g], "ground truth")
        s2, e2, gint = gt_dur[g]
        if ps >= e2 or pe <= s2:
          # Disjoint durations: the official vIoU is 0. without reading a
          # box, so the pair can neither match nor fail; skip it (and the
          # conversion of trajectories only such pairs would need).
          continue
        if pa is None:
          pa = _traj_of(v.vid, i, p, "sub_traj", "prediction", store)
          po = _traj_of(v.vid, i, p, "obj_traj", "prediction", store)
        if g not in gt_traj:
          rel = v.gts[g]
          gt_traj[g] = (
              _traj_of(v.vid, g, rel, "sub_traj", "ground truth", store),
              _traj_of(v.vid, g, rel, "obj_traj", "ground truth", store))
        gs, go = gt_traj[g]
        rows_v.append(slot)
        rows_c.append(c)
        rows_g.append(g)
        ta_s.append(pa)
        tb_s.append(gs)
        ta_o.append(po)
        tb_o.append(go)
        dur_a.append((ps, pe))
        dur_b.append((s2, e2))
        int_a.append(pint)
        int_b.append(gint)
      v.cand_pos.append(pos)
      c += 1
    max_c = max(max_c, c)
    max_g = max(max_g, len(v.gts))

  for v in batch:
    v.matched = np.zeros(len(v.order), bool)
  if not rows_v:
    return
  boxes, offsets, lengths, volumes = store.finalize()
  k = len(rows_v)
  dur_a = np.asarray(dur_a, np.float64).reshape(k, 2)
  dur_b = np.asarray(dur_b, np.float64).reshape(k, 2)
  int_a = np.asarray(int_a, bool)
  int_b = np.asarray(int_b, bool)
  # Subject and object pairs in one call.
  viou, crash = overlaps.pair_vious(
      boxes, offsets, lengths, volumes,
      np.asarray(ta_s + ta_o, np.int64), np.asarray(tb_s + tb_o, np.int64),
      np.concatenate([dur_a, dur_a]), np.concatenate([dur_b, dur_b]),
      np.concatenate([int_a, int_a]), np.concatenate([int_b, int_b]))
  s_iou, o_iou = viou[:k], viou[k:]
  ov = np.where(o_iou < s_iou, o_iou, s_iou)  # Python min(s_iou, o_iou)
  pair_crash = crash[:k] | crash[k:]

  shape = (len(batch), max_c, max_g)
  ov_t = np.full(shape, -np.inf)
  same_t = np.zeros(shape, bool)
  crash_t = np.zeros(shape, bool)
  rv, rc, rg = np.asarray(rows_v), np.asarray(rows_c), np.asarray(rows_g)
  ov_t[rv, rc, rg] = ov
  same_t[rv, rc, rg] = True
  crash_t[rv, rc, rg] = pair_crash
  ok, _, crash_hit = kernels.greedy_match(ov_t, same_t, crash_t, threshold)
  if crash_hit.any():
    slot, c = map(int, np.argwhere(crash_hit)[0])
    v = batch[slot]
    i = v.order[v.cand_pos[c]]
    sel = (rv == slot) & (rc == c) & pair_crash
    g = int(rg[sel][0])
    field = "sub_traj" if crash[:k][sel][0] else "obj_traj"
    raise ScoringError(
        f"{_where(v.vid, i, field)}: the official scorer cannot evaluate it "
        f"against ground truth {g} (its box list does not cover the shared "
        "frames of the two durations, a duration bound is not an integer, "
        "or the vIoU denominator is 0)")
  for slot, v in enumerate(batch):
    n = len(v.cand_pos)
    if n:
      v.matched[np.asarray(v.cand_pos)] = ok[slot, :n]


def _batches(videos, prediction):
  """Groups videos so one batch converts a bounded number of boxes."""
  batch, boxes, entries = [], 0, 0
  for v in videos:
    preds = prediction.get(v.vid, [])
    gt_t = {tuple(r["triplet"]) if isinstance(r, Mapping) and isinstance(
        r.get("triplet"), (list, tuple)) else None for r in v.gts}
    nb = sum(len(r.get("sub_traj") or ()) for r in v.gts)
    nb += sum(len(preds[i].get("sub_traj") or ())
              for i, t in zip(v.order, v.triplets) if t in gt_t)
    ne = len(v.order) * max(1, len(v.gts))
    if batch and (boxes + nb > _BOXES_PER_BATCH
                  or entries + ne > _GREEDY_ENTRIES):
      yield batch
      batch, boxes, entries = [], 0, 0
    batch.append(v)
    boxes += nb
    entries += ne
  if batch:
    yield batch


def evaluate(groundtruth: Mapping[str, Sequence[Mapping]],
             prediction: Mapping[str, Sequence[Mapping]],
             protocol: str = "helper",
             viou_threshold: float = 0.5) -> Result:
  """Relation detection mAP / R@50 / R@100 and tagging P@1 / P@5 / P@10.

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
      missing field, a box list too short for a needed frame.
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
    raise ScoringError("no video has ground truth (the official scorer fails "
                       "on np.concatenate([]))")
  for batch in _batches(videos, prediction):
    _match_batch(batch, prediction, viou_threshold)

  video_ap = {}
  tp_at = {n: 0 for n in DET_NRETURNS}
  len_at = {n: 0 for n in DET_NRETURNS}
  prec_at = {k: [] for k in TAG_NRETURNS}
  tot_gt = 0
  for v in videos:
    tot_gt += len(v.gts)
    finite = np.isfinite(np.asarray(v.scores, np.float64).reshape(-1))
    hits = v.matched & finite
    prec, rec = metrics.pr_curve(hits, len(v.gts))
    video_ap[v.vid] = metrics.voc_ap(rec, prec)
    for n in DET_NRETURNS:
      tp_at[n] += int(hits[:n].sum())
      len_at[n] += min(n, hits.size)
    try:
      tag = metrics.tagging_precision(
          v.triplets, v.scores, {_triplet_of(v.vid, g, r, "ground truth")
                                 for g, r in enumerate(v.gts)}, TAG_NRETURNS)
    except OverflowError:
      raise ScoringError(
          f"video {v.vid!r}: all scores are integers and a predicted triplet "
          "is not in the ground truth; the official scorer fails assigning "
          "-inf into its integer score array") from None
    for k in TAG_NRETURNS:
      prec_at[k].append(tag[k])

  mean_ap = np.mean(list(video_ap.values()))
  rec_at_n = {}
  for n in DET_NRETURNS:
    if len_at[n] == 0 and top is None:
      raise ScoringError(
          "no video with ground truth has any prediction: the helper scorer "
          "fails here (IndexError on an empty recall list); the vru20 "
          "protocol scores it as 0")
    rec_at_n[n] = metrics.recall_at(tp_at[n], tot_gt) if len_at[n] else 0.
  mprec_at_n = {k: np.mean(prec_at[k]) for k in TAG_NRETURNS}
  if top is not None:
    mean_ap = round(float(mean_ap), 4)
    rec_at_n = {n: (round(float(x), 4) if len_at[n] else 0.)
                for n, x in rec_at_n.items()}
    mprec_at_n = {k: round(float(x), 4) for k, x in mprec_at_n.items()}
  return Result(mean_ap=mean_ap, rec_at_n=rec_at_n, mprec_at_n=mprec_at_n,
                video_ap=video_ap, num_videos=len(videos), num_gt=tot_gt)


def zero_shot_triplets(groundtruth, train_groundtruth) -> set:
  """Triplets of `groundtruth` that never occur in `train_groundtruth`."""
  def triplets(gt):
    return {tuple(r["triplet"]) for rels in gt.values() for r in rels}
  return triplets(groundtruth) - triplets(train_groundtruth)


def zero_shot_split(groundtruth, prediction, zs_triplets, generalized):
  """GT/prediction dicts of the zero-shot evaluations (spec 1.6).

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
      pred[vid] = (list(preds) if generalized else
                   [r for r in preds if tuple(r["triplet"]) in zs_triplets])
  return gt, pred
