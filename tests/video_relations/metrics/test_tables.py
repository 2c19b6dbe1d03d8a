"""The array path: `RelationTable` builders and `scoring.evaluate_tables`.

`evaluate_tables` must give the numbers of `evaluate` on the equivalent
dicts (which the fixture test ties to the official code), including the
top-200 cut, score ties, NaN scores (Python's sort order) and refusals.
"""

import dataclasses

import numpy as np
import pytest

from relations.video_relations.metrics import columns
from relations.video_relations.metrics import scoring
from relations.video_relations.inference import association
from tests.video_relations.metrics.helpers import gt, pred

NEXT = ("adult", "next_to", "dog")
BEHIND = ("adult", "behind", "dog")
SQ, FAR = [0, 0, 9, 9], [20, 0, 29, 9]


def _random_case(seed, num_videos=6, preds_per_video=230):
  """Float boxes jittered around GT, tied and NaN scores, > 200 per video."""
  rng = np.random.default_rng(seed)
  trip = [NEXT, BEHIND, ("dog", "chase", "adult")]
  g, rels = {}, {}
  for v in range(num_videos):
    vid = f"v{v}"
    g[vid] = []
    tracks = []
    for _ in range(int(rng.integers(1, 6))):
      s = int(rng.integers(0, 20))
      e = s + int(rng.integers(1, 15))
      sub = np.cumsum(rng.normal(0, 2, (e - s, 4)), 0) + [10, 10, 60, 60]
      obj = np.cumsum(rng.normal(0, 2, (e - s, 4)), 0) + [40, 5, 90, 70]
      sub, obj = np.round(sub), np.round(obj)
      t = trip[int(rng.integers(0, 3))]
      g[vid].append(
        {
          "triplet": t,
          "subject_tid": 0,
          "object_tid": 1,
          "duration": (s, e),
          "sub_traj": sub.tolist(),
          "obj_traj": obj.tolist(),
        }
      )
      tracks.append((t, s, e, sub, obj))
    rels[vid] = []
    for _ in range(preds_per_video):
      t, s, e, sub, obj = tracks[int(rng.integers(0, len(tracks)))]
      ds, de = rng.integers(-2, 3, 2)
      s2 = max(0, s + int(ds))
      e2 = max(s2 + 1, e + int(de))
      idx = np.clip(np.arange(s2, e2) - s, 0, e - s - 1)
      jit = lambda b, idx=idx, n=e2 - s2: b[idx] + rng.normal(0, 3, (n, 4))
      if rng.random() < 0.2:
        t = trip[int(rng.integers(0, 3))]
      score = float(rng.choice([0.25, 0.5, 0.75])) if rng.random() < 0.5 else float(rng.random())
      if rng.random() < 0.02:
        score = float("nan")
      # A model's relation; its score is the mean of one confidence.
      rels[vid].append(association.Relation(t, s2, e2, jit(sub), jit(obj), [score]))
  return g, rels


def _as_dicts(rels):
  return {
    vid: [
      {
        "triplet": list(r.triplet),
        "score": r.score,
        "duration": [r.start, r.end],
        "sub_traj": r.sub_traj.tolist(),
        "obj_traj": r.obj_traj.tolist(),
      }
      for r in rs
    ]
    for vid, rs in rels.items()
  }


def test_from_relations_equals_from_dicts():
  _, rels = _random_case(0, num_videos=2, preds_per_video=5)
  a = columns.RelationTable.from_relations(rels)
  b = columns.RelationTable.from_dicts(_as_dicts(rels))
  # Float arrays from a model vs numbers the official code may hold as ints.
  assert (a.exact_ints, b.exact_ints) == (False, True)
  for f in dataclasses.fields(a):
    if f.name == "exact_ints":
      continue
    x, y = getattr(a, f.name), getattr(b, f.name)
    if isinstance(x, np.ndarray):
      np.testing.assert_array_equal(x, y)
    else:
      assert x == y, f.name
  assert a.video_rows(1) == slice(5, 10)
  assert a.boxes.shape == (int(a.length.sum()), 4)


@pytest.mark.parametrize("protocol", ["helper", "vru20"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tables_equal_dicts(protocol, seed):
  g, rels = _random_case(seed)
  want = scoring.evaluate(g, _as_dicts(rels), protocol)
  got = scoring.evaluate_tables(
    columns.RelationTable.from_dicts(g), columns.RelationTable.from_relations(rels), protocol
  )
  assert got.official_lines() == want.official_lines()
  assert got.video_ap == want.video_ap
  assert 0 < got.as_dict()["mAP"] < 1  # a non-trivial case


def test_prediction_videos_are_looked_up_by_id():
  g = {"A": [gt(NEXT, (0, 2), SQ, FAR)], "B": [gt(NEXT, (0, 2), SQ, FAR)], "C": []}
  p = {
    "X": [pred(NEXT, 1.0, (0, 2), SQ, FAR)],  # no GT: ignored
    "B": [pred(NEXT, 0.5, (0, 2), SQ, FAR)],
    "C": [pred(NEXT, 0.5, (0, 2), SQ, FAR)],
  }  # empty GT: skipped
  r = scoring.evaluate_tables(
    columns.RelationTable.from_dicts(g), columns.RelationTable.from_dicts(p)
  )
  assert r.video_ap == {"A": 0.0, "B": 1.0}
  assert r.num_videos == 2


def test_refusal_names_video_prediction_and_field():
  g = {"A": [gt(NEXT, (0, 3), SQ, FAR)]}
  p = {
    "A": [
      pred(NEXT, 0.9, (0, 3), SQ, FAR),
      pred(NEXT, 0.5, (0, 3), SQ, FAR),
      pred(NEXT, 0.7, (0, 3), SQ, FAR, n=2),
    ]
  }  # 2 boxes, 3 frames
  p["A"][2]["sub_traj"] = p["A"][2]["sub_traj"] + [SQ]  # object one short
  tables = (columns.RelationTable.from_dicts(g), columns.RelationTable.from_dicts(p))
  # The first prediction consumes the GT: the broken one is never read.
  assert scoring.evaluate_tables(*tables).video_ap == {"A": 1.0}
  p["A"][0]["triplet"] = list(BEHIND)
  with pytest.raises(
    scoring.ScoringError,
    match=r"video 'A', prediction 2, field 'obj_traj'.*"
    r"IndexError",
  ):
    scoring.evaluate_tables(
      columns.RelationTable.from_dicts(g), columns.RelationTable.from_dicts(p)
    )
  with pytest.raises(scoring.ScoringError, match="prediction 2, field 'obj_traj'"):
    scoring.evaluate(g, p)
