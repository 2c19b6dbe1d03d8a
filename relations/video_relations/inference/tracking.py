"""Links per-frame detections into trajectories (tracking by detection).

Per sampled frame, live tracks are matched to detections by an optimal
assignment (`scipy.optimize.linear_sum_assignment`) on the affinity

    a(track, det) = w_app * cos(emb_track, emb_det) + w_iou * IoU(pred, det)

where `pred` is the track's box extrapolated with its last velocity and
`emb_track` an exponential moving average of its detections' appearance
embeddings. Documented thresholds (`TrackerConfig`):
- `det_threshold`: detections below this foreground score are ignored;
- `nms_iou`: class-agnostic NMS among the kept detections (a set-prediction
  head rarely duplicates, but a half-trained one does);
- `match_threshold`: a match needs affinity >= this, and IoU >= `iou_gate` or
  cosine >= `app_gate` (so neither cue alone links far-apart objects);
- birth: an unmatched detection with score >= `birth_threshold` starts a track;
- death: a track unmatched for more than `max_misses` consecutive sampled
  frames ends (it may bridge short occlusions);
- `min_length`: tracks with fewer observations are discarded at the end.
"""

import dataclasses

import numpy as np
import scipy.optimize

from relations.video_relations import boxes as box_lib


@dataclasses.dataclass(frozen=True)
class TrackerConfig:
  det_threshold: float = 0.5
  birth_threshold: float = 0.6
  nms_iou: float = 0.7
  w_app: float = 0.5
  w_iou: float = 0.5
  match_threshold: float = 0.3
  iou_gate: float = 0.1
  app_gate: float = 0.7
  max_misses: int = 2
  min_length: int = 2
  ema: float = 0.7


@dataclasses.dataclass
class Track:
  """One trajectory over sampled frames.

  `frames` are indices into the sampled-frame axis, `boxes` `[n, 4]` xyxy,
  `scores` `[n]`, `class_probs` `[n, C]` (no-object excluded).
  """

  track_id: int
  frames: list
  boxes: list
  scores: list
  class_probs: list
  embedding: np.ndarray
  misses: int = 0

  def predicted_box(self):
    if len(self.boxes) < 2:
      return self.boxes[-1]
    gap = self.frames[-1] - self.frames[-2]
    vel = (self.boxes[-1] - self.boxes[-2]) / max(gap, 1)
    return self.boxes[-1] + vel * (self.misses + 1)

  def category_distribution(self):
    """Score-weighted mean class distribution `[C]` (sums to 1)."""
    w = np.asarray(self.scores)[:, None]
    p = (np.asarray(self.class_probs) * w).sum(0) / max(w.sum(), 1e-9)
    return p / max(p.sum(), 1e-9)


def nms(boxes, scores, iou):
  """Greedy class-agnostic NMS; returns kept indices by descending score."""
  order = np.argsort(-np.asarray(scores), kind="stable")
  keep = []
  ious = box_lib.np_pairwise_iou(boxes, boxes)
  suppressed = np.zeros(len(order), bool)
  for i in order:
    if suppressed[i]:
      continue
    keep.append(int(i))
    suppressed |= ious[i] > iou
  return keep


def link_detections(frames, cfg=TrackerConfig()):
  """Tracks from per-frame detections.

  Args:
    frames: list over sampled frames of dicts with `boxes` `[Q, 4]` xyxy,
      `scores` `[Q]` foreground score, `class_probs` `[Q, C]`, `embeddings`
      `[Q, E]`.
    cfg: thresholds, see module docstring.

  Returns:
    List of `Track` (observations in frame order), ids 0, 1, ... in birth
    order, short tracks removed.
  """
  live, done = [], []
  next_id = 0
  for t, det in enumerate(frames):
    scores = np.asarray(det["scores"], np.float64)
    idx = np.flatnonzero(scores >= cfg.det_threshold)
    if idx.size:
      idx = idx[nms(np.asarray(det["boxes"])[idx], scores[idx], cfg.nms_iou)]
    boxes = np.asarray(det["boxes"], np.float64)[idx]
    emb = np.asarray(det["embeddings"], np.float64)[idx]
    emb = emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-9)
    matched_det = set()
    if live and idx.size:
      pred = np.stack([tr.predicted_box() for tr in live])
      iou = box_lib.np_pairwise_iou(pred, boxes)
      cos = np.stack([tr.embedding for tr in live]) @ emb.T
      aff = cfg.w_app * cos + cfg.w_iou * iou
      ok = (aff >= cfg.match_threshold) & ((iou >= cfg.iou_gate) | (cos >= cfg.app_gate))
      rows, cols = scipy.optimize.linear_sum_assignment(np.where(ok, -aff, 1e6))
      for r, c in zip(rows, cols):
        if not ok[r, c]:
          continue
        tr = live[r]
        k = idx[c]
        tr.frames.append(t)
        tr.boxes.append(boxes[c])
        tr.scores.append(float(scores[k]))
        tr.class_probs.append(np.asarray(det["class_probs"][k], np.float64))
        e = cfg.ema * tr.embedding + (1 - cfg.ema) * emb[c]
        tr.embedding = e / max(np.linalg.norm(e), 1e-9)
        tr.misses = -1  # reset below
        matched_det.add(c)
    still = []
    for tr in live:
      tr.misses += 1
      (still if tr.misses <= cfg.max_misses else done).append(tr)
    live = still
    for c in range(idx.size):
      k = idx[c]
      if c in matched_det or scores[k] < cfg.birth_threshold:
        continue
      live.append(
        Track(
          next_id,
          [t],
          [boxes[c]],
          [float(scores[k])],
          [np.asarray(det["class_probs"][k], np.float64)],
          emb[c],
        )
      )
      next_id += 1
  tracks = sorted(done + live, key=lambda tr: tr.track_id)
  tracks = [tr for tr in tracks if len(tr.frames) >= cfg.min_length]
  for new_id, tr in enumerate(tracks):
    tr.track_id = new_id
  return tracks
