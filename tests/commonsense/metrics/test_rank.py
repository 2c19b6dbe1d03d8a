"""Acc@50 candidate construction and ranking."""

import numpy as np
import pytest

from relations.commonsense.metrics import rank


def _annots(num_events=30):
  out = []
  for e in range(num_events):
    out.append(
      {
        "img_fn": f"m/{e}.jpg",
        "event": f"{e % 5 + 1} does {e}",
        "place": "here",
        "intent": [f"want {e} {k}" for k in range(e % 3 + 1)],
        "before": [f"walk {e} {k}" for k in range(2)],
        "after": [] if e % 4 == 0 else [f"leave {e}"],
      }
    )
  return out


def test_candidates_seeded_and_valid(tmp_path):
  annots = _annots()
  records = rank.expand_records(annots)
  queries = rank.build_candidates(annots, seed=3)
  assert queries == rank.build_candidates(annots, seed=3)
  assert queries != rank.build_candidates(annots, seed=4)
  # One query per non-empty (event, relation).
  assert len(queries) == sum(1 + 1 + (e % 4 != 0) for e in range(30))
  for q in queries:
    cands, num_gt = q["candidates"], q["num_gt"]
    assert len(cands) == 50 and len(set(cands)) == 50
    key = rank._key(records[q["query"]])
    assert [rank._key(records[c]) == key for c in cands] == (
      [True] * num_gt + [False] * (50 - num_gt)
    )
  path = tmp_path / "cands.json"
  rank.save_candidates(str(path), queries, seed=3, num_candidates=50)
  assert rank.load_candidates(str(path)) == queries


def test_rank_accuracy_denominators():
  annots = _annots()
  queries = rank.build_candidates(annots, seed=0)
  gt_texts = {}
  for q in queries:
    records = rank.expand_records(annots)
    gt_texts[q["query"]] = {records[c]["inference_text"] for c in q["candidates"][: q["num_gt"]]}

  def oracle_score(contexts, cands):
    # Ground truth: 3 tokens, NLL 3.3 -> 0.825 (n+1) / 1.1 (n).
    # Negatives: 1 token, NLL 1.5 -> 0.75 (n+1) / 1.5 (n).
    nll, ntok = [], []
    for ctx, cand in zip(contexts, cands):
      same = (
        cand["event_idx"] == ctx["event_idx"]
        and cand["inference_relation"] == ctx["inference_relation"]
      )
      nll.append(3.3 if same else 1.5)
      ntok.append(3 if same else 1)
    return np.array(nll), np.array(ntok)

  got = rank.rank_accuracy(annots, queries, oracle_score, batch_size=7)
  assert got["Acc@50_plain_n"] == 1.0  # GT mean NLL 1.1 < 1.5.
  assert got["Acc@50"] == 0.0  # With n+1, negatives win (0.75 < 0.825).
  assert got["num_queries"] == len(queries)


def test_recall_ties_are_stable():
  assert rank.recall_at_num_gt(np.array([1.0, 1.0, 1.0, 0.5]), 2) == 0.5


def test_bad_candidate_index():
  annots = _annots(3)
  with pytest.raises(ValueError, match="candidate index 999"):
    rank.rank_accuracy(
      annots,
      [{"query": 0, "candidates": [0, 999], "num_gt": 1}],
      lambda c, d: (np.zeros(len(c)), np.ones(len(c))),
    )
