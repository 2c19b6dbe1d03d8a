"""Prior-only baseline: ground-truth trajectories + training triplet counts.

For every ordered pair of annotated trajectories that co-occur in a video,
predict the `k` predicates seen most often in training for the pair's
(subject category, object category), each scored by its empirical
probability `count(s, p, o) / count(s, *, o)`, over the whole co-occurrence
with the annotated boxes. No pixel is looked at: any model must beat this.
"""

import collections

import numpy as np

from relations.video_relations.inference import association
from relations.video_relations.inference import pipeline


def triplet_counts(train_examples, categories, predicates):
  """`{(subject, object): Counter(predicate)}` over training relation instances.

  Args:
    train_examples: iterable of TFDS examples (only `tracks/category` and
      `relations` are read).
    categories, predicates: names indexed by the class ids of the examples.
  """
  counts = collections.defaultdict(collections.Counter)
  for ex in train_examples:
    cats = np.asarray(ex["tracks"]["category"])
    rel = ex["relations"]
    for s, o, p in zip(rel["subject"], rel["object"], rel["predicate"]):
      counts[(categories[cats[s]], categories[cats[o]])][predicates[p]] += 1
  return counts


def predict_video(example, counts, categories, k=5):
  """Prior predictions (`association.Relation`) for one video."""
  tracks = pipeline.groundtruth_tracks(example)
  out = []
  for a in tracks:
    for b in tracks:
      if a is b:
        continue
      start, end = max(a.start, b.start), min(a.end, b.end)
      if end <= start:
        continue
      ca, cb = categories[a.category], categories[b.category]
      cnt = counts.get((ca, cb))
      if not cnt:
        continue
      total = sum(cnt.values())
      # most_common breaks ties by first insertion: deterministic.
      for pred, c in cnt.most_common(k):
        out.append(
          association.Relation(
            (ca, pred, cb),
            start,
            end,
            a.native_boxes[start - a.start : end - a.start],
            b.native_boxes[start - b.start : end - b.start],
            [c / total],
            {"sub_track": a.track_id, "obj_track": b.track_id},
          )
        )
  return out
