"""`relations.evaluate commonsense --acc50 --candidates FILE` on the official ranking layout."""

import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from relations.commonsense.metrics import cli as commonsense_cli
from relations.commonsense.metrics import rank
from tests.commonsense.metrics.test_rank import _annots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _official_style_file(path, annots, seed=0):
  """A ranking written the way visual-comet scripts/run_rank.py writes one.

  Its records are the training expansion (with the extra fields the official loader keeps), each
  query's candidates are its ground truths then random others, `rank` is the argsort of the
  candidates' perplexities, recall counts ground truths among the first num_gt, and the file is
  `json.dump({'mean_recall': np.mean(recalls), 'results': results})`.
  """
  rng = random.Random(seed)
  records = [dict(r, movie="m", split="val") for r in rank.expand_records(annots)]
  by_key = {}
  for i, r in enumerate(records):
    by_key.setdefault(r["img_fn"] + r["event"] + r["inference_relation"], []).append(i)
  seen, results, recalls = set(), [], []
  for r in records:
    key = r["img_fn"] + r["event"] + r["inference_relation"]
    if key in seen:
      continue
    seen.add(key)
    indices = list(by_key[key])
    others = rng.sample([i for i in range(len(records)) if i not in indices], 50 - len(indices))
    indices += others
    perplexities = np.array([rng.uniform(1, 10) for _ in indices])
    sorted_indices = np.argsort(perplexities)
    num_gt = len(by_key[key])
    recall = sum(1 for i in range(num_gt) if sorted_indices[i] < num_gt) / num_gt
    rec = dict(r, inference_candidate_indices=indices)
    rec.update(rank=sorted_indices.tolist(), num_gt=num_gt, recall=recall)
    recalls.append(recall)
    results.append(rec)
  with open(path, "w") as f:
    json.dump({"mean_recall": np.mean(recalls), "results": results}, f)
  return float(np.mean(recalls))


def test_cli_acc50_on_an_official_style_file(tmp_path):
  annots = _annots()
  (tmp_path / "val_annots.json").write_text(json.dumps(annots))
  want = _official_style_file(tmp_path / "val_rank_random_50.json", annots)
  assert 0 < want < 1
  out = tmp_path / "acc.json"
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "relations.evaluate",
      "commonsense",
      "--annotations",
      str(tmp_path / "val_annots.json"),
      "--acc50",
      "--candidates",
      str(tmp_path / "val_rank_random_50.json"),
      "--output",
      str(out),
    ],
    check=False,
    capture_output=True,
    text=True,
    cwd=ROOT,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  got = json.loads(out.read_text())
  assert got["Acc@50"] == pytest.approx(want, abs=1e-12)
  assert got["num_queries"] == sum(1 + 1 + (e % 4 != 0) for e in range(30))
  assert "Acc@50" in proc.stdout


def test_our_writer_round_trips_through_the_reader(tmp_path):
  annots = _annots()
  queries = rank.build_candidates(annots, seed=1)
  rng = np.random.default_rng(0)
  nll = [rng.uniform(1, 5, len(q["candidates"])) for q in queries]
  ntok = [rng.integers(1, 6, len(q["candidates"])) for q in queries]
  path = str(tmp_path / "val_rank_random_50.json")
  written = rank.write_official_results(path, annots, queries, nll, ntok)
  want = rank.accuracy_from_scores(queries, nll, ntok)["Acc@50"]
  assert written["mean_recall"] == pytest.approx(want)
  assert rank.accuracy_from_official_results(path, annots)["Acc@50"] == pytest.approx(want)
  # The same file is also what the evaluator's acc50_candidates reads back.
  assert rank.candidates_from_official(path, rank.expand_records(annots)) == queries


def _write(tmp_path, data, annots):
  (tmp_path / "a.json").write_text(json.dumps(annots))
  (tmp_path / "r.json").write_text(json.dumps(data))
  return [
    "--annotations",
    str(tmp_path / "a.json"),
    "--acc50",
    "--candidates",
    str(tmp_path / "r.json"),
  ]


@pytest.mark.parametrize(
  "mutate, message",
  [
    (lambda r: r.pop("rank"), r"result 0: missing field 'rank' \(a candidate file without"),
    (lambda r: r.update(recall=0.123), r"result 0: field 'recall'=0.123 but its rank gives"),
    (lambda r: r.update(rank=[0] * 50), r"result 0: field 'rank' must be a permutation of 0..49"),
    (
      lambda r: r["inference_candidate_indices"].reverse(),
      r"result 0: field 'inference_candidate_indices': the first num_gt=1 are not all ground",
    ),
  ],
)
def test_bad_ranking_files_are_refused_by_name(tmp_path, capsys, mutate, message):
  annots = _annots()
  _official_style_file(tmp_path / "x.json", annots)
  data = json.loads((tmp_path / "x.json").read_text())
  mutate(data["results"][0])
  assert commonsense_cli.main(_write(tmp_path, data, annots)) == 2
  err = capsys.readouterr().err
  assert "r.json" in err
  assert re.search(message, err), err


def test_acc50_needs_candidates(tmp_path, capsys):
  (tmp_path / "a.json").write_text(json.dumps(_annots()))
  assert commonsense_cli.main(["--annotations", str(tmp_path / "a.json"), "--acc50"]) == 2
  assert "--acc50 and --candidates FILE go together" in capsys.readouterr().err
