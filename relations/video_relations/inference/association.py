"""Greedy relational association: segment predictions -> video relations.

Follows the baseline of VidVRD-helper (`baseline/association.py`), re-written:
segments are visited in order of start frame, each contributes its top-k
predictions by score; a prediction extends one relation created or extended
in the previous segment (visited by descending mean confidence) when the
triplets are identical, the prediction starts before the relation ends, and
both subject and object trajectories overlap with vIoU >= `threshold` on the
shared frames; every relation takes at most one extension per segment;
otherwise the prediction starts a new relation. Relations not extended are
closed. Merging averages boxes on the shared frames and appends new ones.
The final score is the mean of the merged confidences.

Deliberate difference: the baseline constructs relations that start after the
first segment without their confidence (the default `confs=1`), inflating the
score of every late-starting relation. Here every relation starts with the
confidence of the prediction that created it, unless `helper_quirk=True`
(`config.video.helper_confidence_quirk`): then, as in the baseline, a relation
created in any segment but the first visited one starts with confidence 1 and
the creating prediction's own confidence is dropped (later extensions append
theirs), so outputs ranked the way the published baseline ranked them can be
reproduced and scored.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(eq=False)  # identity semantics: held in lists
class Relation:
  """A relation instance over native frames `[start, end)`.

  `sub_traj` / `obj_traj` are `[end - start, 4]` float64 xyxy pixel boxes;
  `confs` the confidences merged so far; `spans` the `(start, end)` of the
  prediction each confidence came from (filled by the association);
  `meta` free-form (e.g. track ids).
  """

  triplet: tuple
  start: int
  end: int
  sub_traj: np.ndarray
  obj_traj: np.ndarray
  confs: list
  meta: dict = dataclasses.field(default_factory=dict)
  spans: list = dataclasses.field(default_factory=list)

  @property
  def score(self):
    return float(np.mean(self.confs))


def shared_frames_viou(traj_a, start_a, traj_b, start_b):
  """vIoU of two trajectories restricted to their shared frames.

  Boxes use the +1 pixel convention of the official tools; 0 if the spans are
  disjoint.

  Args:
    traj_a: `[n_a, 4]` xyxy boxes for native frames `start_a ...`.
    start_a: first frame of `traj_a`.
    traj_b: `[n_b, 4]`; start_b: first frame of `traj_b`.

  Returns:
    float: sum of intersections / sum of unions over the shared frames.
  """
  lo = max(start_a, start_b)
  hi = min(start_a + len(traj_a), start_b + len(traj_b))
  if hi <= lo:
    return 0.0
  a = np.asarray(traj_a, np.float64)[lo - start_a : hi - start_a]
  b = np.asarray(traj_b, np.float64)[lo - start_b : hi - start_b]
  iw = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]) + 1, 0, None)
  ih = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]) + 1, 0, None)
  inter = float(np.sum(iw * ih))
  area_a = float(np.sum((a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)))
  area_b = float(np.sum((b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)))
  union = area_a + area_b - inter
  return inter / union if union > 0 else 0.0


def _merge(traj, start, new, new_start):
  """Merges `new` (starting inside `traj`) into `traj`; returns new array."""
  end = start + len(traj)
  new_end = new_start + len(new)
  out = np.asarray(traj, np.float64).copy()
  n_shared = min(end, new_end) - new_start
  if n_shared > 0:
    out[new_start - start : new_start - start + n_shared] = (
      out[new_start - start : new_start - start + n_shared] + new[:n_shared]
    ) / 2
  if new_end > end:
    out = np.concatenate([out, np.asarray(new, np.float64)[end - new_start :]])
  return out


def greedy_relational_association(
  segment_predictions, threshold=0.5, topk_per_segment=100, helper_quirk=False
):
  """Links short-term relation predictions into video-level relations.

  Args:
    segment_predictions: list of `(segment_start, preds)`; each pred is a
      `Relation` with one confidence (its segment score) and its own
      `[start, end)` inside the segment.
    threshold: vIoU on shared frames required for both subject and object.
    topk_per_segment: predictions per segment considered (by score).
    helper_quirk: reproduce the baseline's confidence-initialisation bug
      (module docstring).

  Returns:
    List of `Relation`, in creation order.
  """
  relations = []
  last_modified = []
  for i, (_, preds) in enumerate(sorted(segment_predictions, key=lambda sp: sp[0])):
    # Stable sort: ties keep the order the segment produced them in.
    preds = sorted(preds, key=lambda p: -p.confs[0])[:topk_per_segment]
    candidates = sorted(last_modified, key=lambda r: -r.score)
    current = []
    for p in preds:
      conf = p.confs[0]
      merged = None
      for r in candidates:
        if r.triplet != p.triplet or p.start >= r.end or p.start < r.start:
          continue
        if (
          shared_frames_viou(r.sub_traj, r.start, p.sub_traj, p.start) >= threshold
          and shared_frames_viou(r.obj_traj, r.start, p.obj_traj, p.start) >= threshold
        ):
          merged = r
          break
      if merged is not None:
        candidates.remove(merged)
        merged.sub_traj = _merge(merged.sub_traj, merged.start, p.sub_traj, p.start)
        merged.obj_traj = _merge(merged.obj_traj, merged.start, p.obj_traj, p.start)
        merged.end = max(merged.end, p.end)
        merged.confs.append(conf)
        merged.spans.append((int(p.start), int(p.end)))
        current.append(merged)
      else:
        r = Relation(
          tuple(p.triplet),
          int(p.start),
          int(p.end),
          np.asarray(p.sub_traj, np.float64).copy(),
          np.asarray(p.obj_traj, np.float64).copy(),
          [1.0 if helper_quirk and i > 0 else conf],
          dict(p.meta),
          [(int(p.start), int(p.end))],
        )
        relations.append(r)
        current.append(r)
    last_modified = current
  return relations


def shrink(rel, frames, num_frames):
  """Cuts `frames` native frames off both ends of `rel` (in place).

  Not at the video's first / last frame; a relation keeps at least one
  frame (the cuts are reduced alternately until it does). Chained segment
  predictions overshoot the relation by about the margin the segment label
  rule allows at each end; this removes a fixed part of it after the
  association, which still needs the overlapping segments to chain.
  """
  cut_lo = frames if rel.start > 0 else 0
  cut_hi = frames if rel.end < num_frames else 0
  length = rel.end - rel.start
  while cut_lo + cut_hi >= length and (cut_lo or cut_hi):
    if cut_lo >= cut_hi:
      cut_lo -= 1
    else:
      cut_hi -= 1
  a, b = cut_lo, length - cut_hi
  rel.sub_traj = rel.sub_traj[a:b]
  rel.obj_traj = rel.obj_traj[a:b]
  rel.start, rel.end = rel.start + a, rel.start + b
  return rel


def trim_weak_ends(rel, ratio):
  """Drops the leading / trailing merged predictions scoring below
  `ratio * max(confs)` (in place); the relation then spans its remaining
  predictions and scores their mean.

  A predicate's probability rises and falls smoothly around a relation, so
  the first and last chained segments often only graze it.
  """
  if ratio <= 0 or len(rel.confs) < 2:
    return rel
  thr = ratio * max(rel.confs)
  keep = [i for i, c in enumerate(rel.confs) if c >= thr]
  i0, i1 = keep[0], keep[-1]
  if i0 == 0 and i1 == len(rel.confs) - 1:
    return rel
  start = rel.spans[i0][0]
  end = max(e for _, e in rel.spans[i0 : i1 + 1])
  a, b = start - rel.start, end - rel.start
  rel.sub_traj, rel.obj_traj = rel.sub_traj[a:b], rel.obj_traj[a:b]
  rel.start, rel.end = start, end
  rel.confs, rel.spans = rel.confs[i0 : i1 + 1], rel.spans[i0 : i1 + 1]
  return rel
