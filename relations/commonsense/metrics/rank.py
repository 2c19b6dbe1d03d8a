"""Acc@50: ranking ground-truth inferences among 50 candidates.

Official procedure (visual-comet dataloaders/vcg_rank.py, scripts/run_rank.py,
rank_mode ``random_50``):

* Records: training-style expansion of the annotations, one per
  (event, relation, inference sentence), relations in the order intent,
  before, after (``expand_records``).
* Queries: the first record of each unique ``img_fn + event + relation``;
  its positives are all records with that key (``num_gt`` of them).
* Candidates: the positives, then ``50 - num_gt`` negatives drawn without
  replacement from all other records (any event, any relation).  The
  official draw uses an unseeded ``random.sample``; ours is seeded
  (``random.Random(seed)``) and the candidate lists are stored as JSON data
  (``save_candidates``/``load_candidates``); use the released
  ``val_rank_random_50.json`` (``candidates_from_official``) to reproduce
  the paper's draw.  If num_gt > 50 every positive is kept and there are no
  negatives (the official code would crash).
* Each candidate is scored with the query's image, event and place and the
  candidate's own relation token and inference text; score = mean token NLL
  over the candidate's labelled tokens (inference + ``<|e_in|>``).  The
  official denominator is n + 1 (an artefact of its loss masking); we report
  both ``Acc@50`` (n + 1, official) and ``Acc@50_plain_n`` (n).
* Candidates are sorted by ascending score (stable); recall = fraction of
  the top-num_gt that are ground truths; Acc@50 = mean recall over queries.

The model enters through ``score_fn(contexts, candidates) -> (nll_sum,
num_tokens)``: two equally long lists of expanded records, returning float
arrays [B] of summed token NLL (nats) and int arrays [B] of labelled tokens.
"""

import json
import random
from typing import Callable, Sequence

import numpy as np

from relations import io_util

RELATIONS = ("intent", "before", "after")
ScoreFn = Callable[[list, list], tuple]


def expand_records(annotations: Sequence[dict]) -> list[dict]:
  """One record per ground-truth inference, in the official order."""
  out = []
  for e, annot in enumerate(annotations):
    for field in ("img_fn", "event"):
      if field not in annot:
        raise ValueError(f"annotations: record {e}: missing field {field!r}")
    for rel in RELATIONS:
      sents = annot.get(rel, [])
      if not isinstance(sents, list):
        raise ValueError(f"annotations: record {e}: field {rel!r} must be a list of strings")
      for s, text in enumerate(sents):
        if not isinstance(text, str):
          raise ValueError(f"annotations: record {e}: field {rel!r}[{s}] must be a string")
        out.append(
          {
            "event_idx": e,
            "img_fn": annot["img_fn"],
            "event": annot["event"],
            "place": annot.get("place", ""),
            "inference_relation": rel,
            "inference_text": text,
          }
        )
  return out


def _key(record):
  return f"{record['img_fn']}_{record['event']}_{record['inference_relation']}"


def build_candidates(
  annotations: Sequence[dict], num_candidates: int = 50, seed: int = 0
) -> list[dict]:
  """Seeded candidate lists (see module docstring).

  Returns:
    One dict per query: ``query`` (record index), ``candidates`` (record
    indices, positives first) and ``num_gt``.
  """
  records = expand_records(annotations)
  positives = {}
  for i, r in enumerate(records):
    positives.setdefault(_key(r), []).append(i)
  rng = random.Random(seed)
  n = len(records)
  queries = []
  seen = set()
  for i, r in enumerate(records):
    key = _key(r)
    if key in seen:
      continue
    seen.add(key)
    pos = positives[key]
    k = max(0, num_candidates - len(pos))
    if k > n - len(pos):
      raise ValueError(f"only {n - len(pos)} negatives available for query {i}, {k} needed")
    # Uniform sample without replacement from range(n) minus `pos`: draw
    # from range(n - len(pos)) and skip over the (sorted) positives.
    draws = rng.sample(range(n - len(pos)), k)
    negatives = []
    for x in draws:
      for p in pos:
        if x >= p:
          x += 1
        else:
          break
      negatives.append(x)
    queries.append({"query": i, "candidates": list(pos) + negatives, "num_gt": len(pos)})
  return queries


def save_candidates(path: str, queries: list[dict], seed: int, num_candidates: int) -> None:
  """Writes candidate lists as JSON (temporary file, then rename)."""
  io_util.write_json_atomic(
    path,
    {"seed": seed, "num_candidates": num_candidates, "queries": queries},
    indent=None,
    newline=False,
  )


def load_candidates(path: str) -> list[dict]:
  """Reads candidate lists written by ``save_candidates``."""
  with open(path) as f:
    data = json.load(f)
  for q, query in enumerate(data.get("queries", [])):
    for field in ("query", "candidates", "num_gt"):
      if field not in query:
        raise ValueError(f"{path}: query {q}: missing field {field!r}")
  return data["queries"]


def candidates_from_official(path: str, records: Sequence[dict]) -> list[dict]:
  """Candidate lists from the released ``val_rank_random_50.json``.

  Its ``results`` are the query records (in order) with
  ``inference_candidate_indices`` and ``num_gt``; queries are matched to our
  expanded `records` by their unique key, in order.
  """
  with open(path) as f:
    data = json.load(f)
  results = data["results"] if isinstance(data, dict) else data
  first = {}
  for i, r in enumerate(records):
    first.setdefault(_key(r), i)
  queries = []
  for q, res in enumerate(results):
    for field in ("inference_candidate_indices", "num_gt", "img_fn", "event", "inference_relation"):
      if field not in res:
        raise ValueError(f"{path}: result {q}: missing field {field!r}")
    key = _key(res)
    if key not in first:
      raise ValueError(f"{path}: result {q}: no annotation record for {key!r}")
    queries.append(
      {
        "query": first[key],
        "candidates": list(res["inference_candidate_indices"]),
        "num_gt": int(res["num_gt"]),
      }
    )
  return queries


def recall_at_num_gt(scores: np.ndarray, num_gt: int) -> float:
  """Fraction of the num_gt best-scored (lowest) candidates that are GT.

  Args:
    scores: [C] candidate scores, ground truths first.
    num_gt: number of ground truths.
  """
  order = np.argsort(scores, kind="stable")
  return float(np.sum(order[:num_gt] < num_gt)) / num_gt


def rank_accuracy(
  annotations: Sequence[dict], queries: Sequence[dict], score_fn: ScoreFn, batch_size: int = 256
) -> dict:
  """Acc@50 with the official (n + 1) and plain (n) NLL denominators.

  Args:
    annotations: the annotation list the candidates index (expanded).
    queries: from build_candidates / load_candidates / candidates_from_official.
    score_fn: model scoring function (see module docstring).
    batch_size: candidates per score_fn call.

  Returns:
    {"Acc@50": mean recall (n + 1), "Acc@50_plain_n": mean recall (n),
     "num_queries": Q}.
  """
  records = expand_records(annotations)
  contexts, cands, owners = [], [], []
  for q, query in enumerate(queries):
    for c in query["candidates"]:
      if not 0 <= c < len(records):
        raise ValueError(
          f"query {q}: candidate index {c} outside the {len(records)} expanded records"
        )
      contexts.append(records[query["query"]])
      cands.append(records[c])
      owners.append(q)
  nll = np.zeros(len(cands), np.float64)
  ntok = np.zeros(len(cands), np.int64)
  for start in range(0, len(cands), batch_size):
    s, t = score_fn(contexts[start : start + batch_size], cands[start : start + batch_size])
    s, t = np.asarray(s, np.float64), np.asarray(t, np.int64)
    if s.shape != t.shape or s.shape[0] != len(cands[start : start + batch_size]):
      raise ValueError("score_fn must return two arrays of shape [B]")
    nll[start : start + len(s)] = s
    ntok[start : start + len(t)] = t
  sizes = np.cumsum([len(q["candidates"]) for q in queries])[:-1]
  return accuracy_from_scores(queries, np.split(nll, sizes), np.split(ntok, sizes))


def accuracy_from_scores(
  queries: Sequence[dict], nll: Sequence[np.ndarray], ntok: Sequence[np.ndarray]
) -> dict:
  """Acc@50 from per-query candidate scores.

  Args:
    queries: as for `rank_accuracy` (only `candidates` and `num_gt` used).
    nll: per query, float [C] summed token NLL of its candidates (in order).
    ntok: per query, int [C] labelled tokens of its candidates.

  Returns:
    See `rank_accuracy`.
  """
  if len(nll) != len(queries) or len(ntok) != len(queries):
    raise ValueError(f"{len(queries)} queries but scores for {len(nll)}")
  recalls_official, recalls_plain = [], []
  for q, query in enumerate(queries):
    s = np.asarray(nll[q], np.float64)
    t = np.asarray(ntok[q], np.int64)
    if s.shape != (len(query["candidates"]),) or t.shape != s.shape:
      raise ValueError(
        f"query {q}: {len(query['candidates'])} candidates but "
        f"scores of shape {s.shape} / {t.shape}"
      )
    if np.any(t <= 0):
      raise ValueError(f"query {q}: a candidate has no labelled tokens")
    recalls_official.append(recall_at_num_gt(s / (t + 1), query["num_gt"]))
    recalls_plain.append(recall_at_num_gt(s / t, query["num_gt"]))
  return {
    "Acc@50": float(np.mean(recalls_official)),
    "Acc@50_plain_n": float(np.mean(recalls_plain)),
    "num_queries": len(queries),
  }


def ranking_order(nll: np.ndarray, ntok: np.ndarray) -> list[int]:
  """Candidate positions sorted by the official score (mean NLL, n + 1 denominator), stable."""
  s = np.asarray(nll, np.float64) / (np.asarray(ntok, np.int64) + 1)
  return np.argsort(s, kind="stable").tolist()


def write_official_results(
  path: str,
  annotations: Sequence[dict],
  queries: Sequence[dict],
  nll: Sequence[np.ndarray],
  ntok: Sequence[np.ndarray],
) -> dict:
  """Writes a ranking in the layout of the official ``<split>_rank_random_50.json``.

  As visual-comet scripts/run_rank.py writes it: ``{"mean_recall": float, "results": [...]}``,
  one result per query: its expanded record plus ``inference_candidate_indices`` (indices into
  the expanded records, ground truths first), ``rank`` (candidate positions, best first),
  ``num_gt`` and ``recall``.

  Args:
    path: the JSON file (written to a temporary name, then renamed).
    annotations: the annotation list the candidates index.
    queries: the candidate lists.
    nll / ntok: per query, [C] summed NLL and [C] labelled tokens of its candidates.

  Returns:
    The written object.
  """
  records = expand_records(annotations)
  results, recalls = [], []
  for q, query in enumerate(queries):
    order = ranking_order(nll[q], ntok[q])
    num_gt = int(query["num_gt"])
    recall = sum(1 for i in order[:num_gt] if i < num_gt) / num_gt
    recalls.append(recall)
    results.append(
      dict(
        records[query["query"]],
        inference_candidate_indices=[int(c) for c in query["candidates"]],
        rank=order,
        num_gt=num_gt,
        recall=recall,
      )
    )
  out = {"mean_recall": float(np.mean(recalls)) if recalls else 0.0, "results": results}
  io_util.write_json_atomic(path, out, indent=None, newline=False)
  return out


def accuracy_from_official_results(path: str, annotations: Sequence[dict]) -> dict:
  """Acc@50 of a ranking file in the official layout (model-free), checked against `annotations`.

  Each result's ``rank`` gives recall = |{positions < num_gt among rank[:num_gt]}| / num_gt;
  Acc@50 is the mean.  The file's own ``recall`` values and ``mean_recall``, when present, must
  agree with that.

  Args:
    path: ``<split>_rank_random_50.json`` as run_rank.py writes it (or a bare list of results).
    annotations: the annotation list it ranks (its expanded records are what the candidate
      indices point at).

  Returns:
    {"Acc@50": mean recall, "num_queries": Q}.

  Raises:
    ValueError: naming the file, the result and the field.
  """
  with open(path) as f:
    data = json.load(f)
  results = data.get("results") if isinstance(data, dict) else data
  if not isinstance(results, list) or not results:
    raise ValueError(f"{path}: expected {{'results': [...]}} (or a list) of ranked queries")
  queries = candidates_from_official(path, expand_records(annotations))
  records = expand_records(annotations)
  recalls = []
  for q, (res, query) in enumerate(zip(results, queries)):
    where = f"{path}: result {q}"
    cands, num_gt = query["candidates"], query["num_gt"]
    if "rank" not in res:
      raise ValueError(
        f"{where}: missing field 'rank' (a candidate file without a model's ranking: score it "
        "with the evaluator's acc50_candidates=FILE)"
      )
    order = res["rank"]
    if sorted(order) != list(range(len(cands))):
      raise ValueError(
        f"{where}: field 'rank' must be a permutation of 0..{len(cands) - 1} (the candidates)"
      )
    if not 1 <= num_gt <= len(cands):
      raise ValueError(f"{where}: field 'num_gt'={num_gt} outside 1..{len(cands)}")
    for c in cands:
      if not (isinstance(c, int) and 0 <= c < len(records)):
        raise ValueError(
          f"{where}: field 'inference_candidate_indices': {c!r} is not an index of the "
          f"{len(records)} expanded annotation records"
        )
    key = _key(records[query["query"]])
    if any(_key(records[c]) != key for c in cands[:num_gt]):
      raise ValueError(
        f"{where}: field 'inference_candidate_indices': the first num_gt={num_gt} are not all "
        f"ground truths of {key!r}"
      )
    recall = sum(1 for i in order[:num_gt] if i < num_gt) / num_gt
    if "recall" in res and not np.isclose(float(res["recall"]), recall, rtol=0, atol=1e-12):
      raise ValueError(f"{where}: field 'recall'={res['recall']} but its rank gives {recall}")
    recalls.append(recall)
  acc = float(np.mean(recalls))
  if isinstance(data, dict) and "mean_recall" in data:
    if not np.isclose(float(data["mean_recall"]), acc, rtol=0, atol=1e-9):
      raise ValueError(
        f"{path}: field 'mean_recall'={data['mean_recall']} but the ranks give {acc}"
      )
  return {"Acc@50": acc, "num_queries": len(recalls)}
