"""Detection AP@0.5 and CLEAR-MOT tracking measures on sampled frames.

These are diagnostics of the `tracks=detected` mode (the relation metrics
come from the exact evaluator in `relations.video_relations.metrics`):
- `detection_ap`: per-category VOC all-points AP at IoU >= 0.5 over all frames
  (greedy in descending score, each ground-truth box matched once), averaged
  over categories that have ground truth;
- `clear_mot`: MOTA, ID switches, FP, FN (Bernardin & Stiefelhagen 2008):
  correspondences of the previous frame are kept while IoU >= 0.5, the rest
  is matched by an optimal assignment on IoU.
"""

import collections

import numpy as np
import scipy.optimize

from relations.video_relations import boxes as box_lib


def voc_ap(rec, prec):
  """VOC2010+ all-points AP from recall / precision arrays."""
  mrec = np.concatenate([[0.0], rec, [1.0]])
  mpre = np.concatenate([[0.0], prec, [0.0]])
  for i in range(len(mpre) - 1, 0, -1):
    mpre[i - 1] = max(mpre[i - 1], mpre[i])
  i = np.flatnonzero(mrec[1:] != mrec[:-1])
  return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def detection_ap(frames, iou_threshold=0.5):
  """Category-aware detection AP.

  Args:
    frames: list of dicts with `gt_boxes` `[G, 4]`, `gt_labels` `[G]`,
      `pred_boxes` `[D, 4]`, `pred_labels` `[D]`, `pred_scores` `[D]`
      (xyxy, any units, same for gt and pred).
    iou_threshold: minimum IoU of a true positive.

  Returns:
    dict with `AP50` (mean over categories with ground truth) and
    `AP50_per_class` `{label: ap}`.
  """
  dets = collections.defaultdict(list)  # label -> [(score, frame, box)]
  n_gt = collections.Counter()
  for f, fr in enumerate(frames):
    for l in np.asarray(fr["gt_labels"]).tolist():
      n_gt[l] += 1
    for b, l, s in zip(
      np.asarray(fr["pred_boxes"]).reshape(-1, 4),
      np.asarray(fr["pred_labels"]).tolist(),
      np.asarray(fr["pred_scores"]).tolist(),
    ):
      dets[l].append((s, f, b))
  per_class = {}
  for label, n in sorted(n_gt.items()):
    d = sorted(dets.get(label, []), key=lambda x: -x[0])
    used = set()
    tp = np.zeros(len(d))
    for i, (_, f, b) in enumerate(d):
      gl = np.asarray(frames[f]["gt_labels"])
      gb = np.asarray(frames[f]["gt_boxes"]).reshape(-1, 4)
      cand = np.flatnonzero(gl == label)
      if cand.size == 0:
        continue
      ious = box_lib.np_pairwise_iou(b[None], gb[cand])[0]
      best = -1
      best_iou = iou_threshold
      for j, o in zip(cand, ious):
        if (f, j) not in used and o >= best_iou:
          best, best_iou = j, o
      if best >= 0:
        used.add((f, best))
        tp[i] = 1
    ctp = np.cumsum(tp)
    rec = ctp / n
    prec = ctp / np.arange(1, len(d) + 1) if d else np.zeros(0)
    per_class[label] = voc_ap(rec, prec) if d else 0.0
  ap = float(np.mean(list(per_class.values()))) if per_class else 0.0
  return {"AP50": ap, "AP50_per_class": per_class}


def clear_mot(frames, iou_threshold=0.5):
  """CLEAR-MOT measures.

  Args:
    frames: list over frames of dicts with `gt_ids` `[G]`, `gt_boxes`
      `[G, 4]`, `track_ids` `[H]`, `track_boxes` `[H, 4]`.
    iou_threshold: minimum IoU of a correspondence.

  Returns:
    dict with `MOTA`, `IDSW`, `FP`, `FN`, `num_gt`, `num_matches`.
  """
  last = {}  # gt id -> track id of its last correspondence
  prev = {}  # gt id -> track id in the previous frame
  fp = fn = idsw = n_gt = n_match = 0
  for fr in frames:
    gid = np.asarray(fr["gt_ids"]).tolist()
    gb = np.asarray(fr["gt_boxes"], np.float64).reshape(-1, 4)
    hid = np.asarray(fr["track_ids"]).tolist()
    hb = np.asarray(fr["track_boxes"], np.float64).reshape(-1, 4)
    n_gt += len(gid)
    iou = box_lib.np_pairwise_iou(gb, hb)
    cur = {}
    used_h = set()
    for gi, g in enumerate(gid):  # keep last frame's correspondences
      h = prev.get(g)
      if h in hid:
        hi = hid.index(h)
        if iou[gi, hi] >= iou_threshold and hi not in used_h:
          cur[g] = h
          used_h.add(hi)
    free_g = [gi for gi, g in enumerate(gid) if g not in cur]
    free_h = [hi for hi in range(len(hid)) if hi not in used_h]
    if free_g and free_h:
      sub = iou[np.ix_(free_g, free_h)]
      rows, cols = scipy.optimize.linear_sum_assignment(-sub)
      for r, c in zip(rows, cols):
        if sub[r, c] >= iou_threshold:
          g, h = gid[free_g[r]], hid[free_h[c]]
          if g in last and last[g] != h:
            idsw += 1
          cur[g] = h
          used_h.add(free_h[c])
    n_match += len(cur)
    fn += len(gid) - len(cur)
    fp += len(hid) - len(cur)
    last.update(cur)
    prev = cur
  mota = 1.0 - (fn + fp + idsw) / n_gt if n_gt else 0.0
  return {"MOTA": mota, "IDSW": idsw, "FP": fp, "FN": fn, "num_gt": n_gt, "num_matches": n_match}
