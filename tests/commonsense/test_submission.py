"""The blind test split: `relations.predict --eval test` writes the leaderboard submission.

test_annots.json has no intent / before / after (the references are hidden on the leaderboard).
The evaluator generates every (event, relation), writes the official generation file (the
leaderboard's input), validates it against the split and scores nothing. A bare
`relations.predict` (no --eval) does not run it, nor does training (`during_training=False`).
"""

import json
import os

import pytest

from relations import predict
from relations.commonsense.data import synthetic
from relations.commonsense.generation import official
from tests.train.test_sharded_eval import _checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(ROOT, "configs", "commonsense.py") + ":variant=tiny"


@pytest.mark.slow
def test_test_split_generation_writes_submission(tmp_path, capsys):
  data = str(tmp_path / "data")
  synthetic.generate(data, seed=2, train_images=2, val_images=1, test_images=2, verbose=False)
  with open(os.path.join(data, "test_annots.json")) as f:
    test_annots = json.load(f)
  assert official.is_blind(test_annots) and test_annots
  overrides = [f"data.data_dir={tmp_path / 'tfds'}", f"data.manual_dir={data}"]
  workdir = str(tmp_path / "run")
  config = _checkpoint(SPEC, overrides, workdir)
  assert config.evals.test.during_training is False and config.evals.test.split == "test"

  argv = ["--config", SPEC, "--workdir", workdir, "--eval", "test"]
  assert predict.main(argv + [f"--config.{o}" for o in overrides]) == 0
  out = capsys.readouterr().out
  step_dir = os.path.join(workdir, "eval", "test", "step_1")
  path = os.path.join(step_dir, "test_sample_1_num_5_top_k_0_top_p_0.9.json")
  assert f"wrote the leaderboard submission {path}" in out and "nothing scored" in out
  with open(path) as f:
    records = json.load(f)
  # Every event, each relation once, in the generation order, 5 samples each.
  assert [(r["event_idx"], r["inference_relation"]) for r in records] == [
    (e, rel) for e in range(len(test_annots)) for rel in ("intent", "before", "after")
  ]
  official.validate_submission(records, test_annots, 5, name=path)
  assert all(r["split"] == "test" for r in records)
  with open(os.path.join(step_dir, "metrics.json")) as f:
    metrics = json.load(f)
  assert metrics == {"generations_file": path, "num_records": len(records), "scored": False}
  with open(os.path.join(workdir, "predict_step1.json")) as f:
    printed = json.load(f)
  assert printed == {
    "test": {"num_records": float(len(records)), "submission_bytes": float(os.path.getsize(path))}
  }

  # A bare predict runs the scored val evaluator only; the submission is left as it was.
  mtime = os.path.getmtime(path)
  cheap = ["evals.val.acc50=False", "evals.val.meteor=False"]
  bare = ["--config", SPEC, "--workdir", workdir]
  assert predict.main(bare + [f"--config.{o}" for o in overrides + cheap]) == 0
  with open(os.path.join(workdir, "predict_step1.json")) as f:
    assert list(json.load(f)) == ["val"]
  assert os.path.getmtime(path) == mtime


def test_submission_validation_names_the_record():
  annots = [{"img_fn": "a.jpg", "event": "1 sits"}]
  good = [
    {
      "img_fn": "a.jpg",
      "event": "1 sits",
      "event_idx": 0,
      "inference_relation": rel,
      "generations": ["x"] * 5,
    }
    for rel in ("intent", "before", "after")
  ]
  official.validate_submission(good, annots, 5)
  with pytest.raises(ValueError, match=r"sub.json: 2 records, expected 3 \(3 relations x 1"):
    official.validate_submission(good[:2], annots, 5, name="sub.json")
  swapped = [good[1], good[0], good[2]]
  with pytest.raises(ValueError, match=r"sub.json: record 0: fields 'event_idx'/'inference_rel"):
    official.validate_submission(swapped, annots, 5, name="sub.json")
  short = [dict(good[0], generations=["x"])] + good[1:]
  with pytest.raises(ValueError, match=r"record 0: field 'generations' must be a list of 5"):
    official.validate_submission(short, annots, 5)
  other = [dict(good[0], img_fn="b.jpg")] + good[1:]
  with pytest.raises(
    ValueError, match=r"record 0: field 'img_fn' differs from annotation record 0"
  ):
    official.validate_submission(other, annots, 5)


def test_scoring_a_blind_split_says_why(tmp_path, capsys):
  from relations.commonsense.metrics import cli as commonsense_cli  # pylint: disable=g-import-not-at-top

  annots, gens = tmp_path / "test_annots.json", tmp_path / "gens.json"
  annots.write_text(json.dumps([{"img_fn": "a.jpg", "event": "1 sits"}]))
  gens.write_text(json.dumps([]))
  argv = ["--annotations", str(annots), "--generations", str(gens), "--no-meteor"]
  assert commonsense_cli.main(argv) == 2
  err = capsys.readouterr().err
  assert "test_annots.json" in err and "a blind split (test_annots.json) cannot be scored" in err
