"""The breakdown papers report and no official tool prints, from the official scorer itself.

Every number comes from `scoring.evaluate` (the exact port of the official scorer) run on a
filtered copy of the ground truth and the predictions; nothing here matches or ranks on its own,
so each group is scored by exactly the official rules (per-video AP, R@N as a micro-average,
tagging P@k read at min(k, #unique triplets)) and the "overall" entry is the official result.

The protocol's per-video cut is applied once, before filtering (VRU'20: the top 200 by score,
stable for ties; helper: none), so a group sees exactly the predictions the official scorer
sees.

Groups (a group's metrics cover only the videos with at least one GT relation in it):
- `predicate_type`, `predicate`, `subject`, `object`: GT relations AND predictions whose
  predicate (type) / subject category / object category is the group's. Matching needs the same
  triplet, so a prediction can only ever match GT of its own group: summed over the groups of one
  kind, the hits are the overall hits wherever the R@N cut does not bite (a video with at most N
  predictions), i.e. `sum_g R@N_g * num_gt_g == R@N * num_gt` then. AP does not add up in general
  (per-video AP is not linear in hits), except where every video holds one group only.
- `duration`: GT relations whose duration (end - begin, native frames) falls in the bin, scored
  against ALL predictions of those videos (the generalised zero-shot convention of the VRU'20
  server: a prediction has no GT duration to be binned by, and binning by its own duration would
  drop matches across a bin edge). R@N there is the recall of the bin's relations; AP and P@k
  count every other prediction as a false positive, so read them as such.

Predicate types: VidOR's 8 spatial and 42 action predicates (the dataset's own split, spec 2.4).
ImageNet-VidVRD publishes no such split; here "spatial" is its bare positional predicates (above,
beneath, behind, front, left, right, next_to, away, toward, past), "comparative" taller / larger /
faster, "action" every other (verbs, also verb_position compounds such as walk_left). Names of
neither list (misspellings the validator warned about) are "other".

Duration bins (`DURATION_BINS`, native-frame edges): short < 90 (3 s at VidOR's usual 30 fps),
medium 90-299 (3-10 s), long >= 300 (10 s and more).

Cost: one scorer run per group on the dict path; minutes on VidOR-validation size (hundreds of
groups), against seconds for the overall numbers.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import scoring

DURATION_BINS = (90, 300)
_TOP = {"vru20": 200, "helper": None}
VIDVRD_SPATIAL = (
  "above",
  "beneath",
  "behind",
  "front",
  "left",
  "right",
  "next_to",
  "away",
  "toward",
  "past",
)
VIDVRD_COMPARATIVE = ("taller", "larger", "faster")


def predicate_type(dataset: str, predicate: str) -> str:
  """ "spatial" / "action" (/ "comparative" on VidVRD) / "other" (module docstring)."""
  if dataset == "vidor":
    if predicate in vrd_categories.VIDOR_SPATIAL_PREDICATES:
      return "spatial"
    return "action" if predicate in vrd_categories.VIDOR_ACTION_PREDICATES else "other"
  if predicate in VIDVRD_SPATIAL:
    return "spatial"
  if predicate in VIDVRD_COMPARATIVE:
    return "comparative"
  return "action" if predicate in vrd_categories.VIDVRD_PREDICATES else "other"


def duration_bin(length: int, bins: Sequence[int] = DURATION_BINS) -> str:
  """ "short" / "medium" / "long" of a duration in native frames (two edges), or "bin<i>"."""
  i = sum(int(length) >= b for b in bins)
  names = (
    ("short", "medium", "long") if len(bins) == 2 else [f"bin{j}" for j in range(len(bins) + 1)]
  )
  return names[i]


def _cut(prediction: Mapping, videos, protocol: str) -> dict:
  top = _TOP[protocol]
  out = {}
  for vid in videos:
    preds = list(prediction.get(vid, []))
    if top is not None:
      preds = sorted(preds, key=lambda r: -r["score"])[:top]  # stable, as the official sort
    out[vid] = preds
  return out


def _score(gt: dict, pred: dict, protocol: str) -> dict:
  gt = {v: r for v, r in gt.items() if r}
  pred = {v: pred.get(v, []) for v in gt}
  try:
    res = scoring.evaluate(gt, pred, protocol)
  except scoring.ScoringError as e:
    # The official helper scorer cannot score a group none of whose videos has a prediction.
    if any(pred.values()):
      raise
    zeros = dict.fromkeys(("mAP", "R@50", "R@100", "P@1", "P@5", "P@10"), 0.0)
    return dict(zeros, num_videos=len(gt), num_gt=sum(map(len, gt.values())), note=str(e))
  return dict(res.as_dict(), num_videos=res.num_videos, num_gt=res.num_gt)


def _by_key(gt: dict, pred: dict, key, protocol: str, filter_predictions: bool = True) -> dict:
  groups = sorted({key(r) for rels in gt.values() for r in rels})
  out = {}
  for g in groups:
    g_gt = {v: [r for r in rels if key(r) == g] for v, rels in gt.items()}
    g_pred = (
      {v: [r for r in rels if key(r) == g] for v, rels in pred.items()}
      if filter_predictions
      else pred
    )
    out[g] = _score(g_gt, g_pred, protocol)
  return out


def breakdown(
  groundtruth: Mapping[str, Sequence[Mapping]],
  prediction: Mapping[str, Sequence[Mapping]],
  protocol: str = "helper",
  dataset: str | None = None,
  duration_bins: Sequence[int] = DURATION_BINS,
) -> dict:
  """The breakdown of one submission (module docstring).

  Args:
    groundtruth: {video_id: [GT relation instance]} (official GT format, `io.load_groundtruth`).
    prediction: the submission's "results".
    protocol: "helper" / "vru20".
    dataset: "vidor" / "vidvrd" (predicate types); None infers it from the first video id.
    duration_bins: increasing native-frame edges.

  Returns:
    {"protocol", "duration_bins", "overall": metrics, "predicate_type": {type: metrics},
    "predicate": {...}, "subject": {category: ...}, "object": {...}, "duration": {bin: ...}};
    metrics = {"mAP", "R@50", "R@100", "P@1", "P@5", "P@10", "num_videos", "num_gt"} (+ "note"
    where the official scorer could not score a group that has no prediction at all: zeros).
  """
  if protocol not in _TOP:
    raise ValueError(f"unknown protocol {protocol!r}; expected one of {sorted(_TOP)}")
  bins = tuple(int(b) for b in duration_bins)
  if list(bins) != sorted(set(bins)) or not bins:
    raise ValueError(f"duration_bins must be increasing native-frame edges, got {bins}")
  gt = {v: list(r) for v, r in groundtruth.items() if r}
  if dataset is None:
    dataset = vrd_categories.dataset_of_video_id(next(iter(gt), ""))
  pred = _cut(prediction, gt, protocol)
  ptype = lambda r: predicate_type(dataset, r["triplet"][1])  # noqa: E731
  length = lambda r: duration_bin(r["duration"][1] - r["duration"][0], bins)  # noqa: E731
  return {
    "protocol": protocol,
    "dataset": dataset,
    "duration_bins": list(bins),
    "overall": _score(gt, pred, protocol),
    "predicate_type": _by_key(gt, pred, ptype, protocol),
    "predicate": _by_key(gt, pred, lambda r: r["triplet"][1], protocol),
    "subject": _by_key(gt, pred, lambda r: r["triplet"][0], protocol),
    "object": _by_key(gt, pred, lambda r: r["triplet"][2], protocol),
    "duration": _by_key(gt, pred, length, protocol, filter_predictions=False),
  }


_COLUMNS = ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")


def format_breakdown(table: dict) -> str:
  """The breakdown as text tables, one per kind of group."""
  lines = []
  for kind in ("predicate_type", "duration", "predicate", "subject", "object"):
    lines.append(f"{kind}" + (f" (edges {table['duration_bins']})" if kind == "duration" else ""))
    lines.append(
      f"  {'group':<24} {'videos':>6} {'GT':>7} " + " ".join(f"{c:>7}" for c in _COLUMNS)
    )
    for g, m in table[kind].items():
      vals = " ".join(f"{m[c]:7.4f}" for c in _COLUMNS)
      lines.append(f"  {g:<24} {m['num_videos']:>6} {m['num_gt']:>7} {vals}")
  return "\n".join(lines)
