"""Training-time scoring on a machine without Java (a TPU VM): METEOR, and the text metrics when
the tokeniser needs the Stanford jar, are NaN with one warning line; the evaluation does not fail."""

import math

from relations.commonsense import evaluator as evaluator_lib
from tests.commonsense.metrics import oracle

ANNOTS = [
  {
    "img_fn": "a.jpg",
    "event": "e",
    "intent": ["go home"],
    "before": ["walk in"],
    "after": ["sit down now"],
  }
]


def _gens(texts):
  return [
    {"event_idx": 0, "inference_relation": r, "generations": texts}
    for r in ("intent", "before", "after")
  ]


def _score(gens):
  return evaluator_lib.score_during_training(
    ANNOTS, gens, None, meteor=True, meteor_workers=1, gen_path="val_sample.json"
  )


def test_meteor_skipped_with_one_warning_when_java_is_hidden(monkeypatch, tmp_path, capsys):
  gens = _gens(["go home", "walk in", "sit", "down", "now"])
  expected, _, _ = oracle.official_metrics(ANNOTS, gens, meteor=False)
  monkeypatch.setenv("PATH", str(tmp_path))  # no `java` on it
  monkeypatch.setattr(evaluator_lib, "_warned_no_java", False)
  first, second = _score(gens), _score(gens)
  for got in (first, second):
    assert got["METEOR"] is None and got["errors"]["METEOR"] == "no `java` on PATH during training"
    for key in ("Bleu_1", "Bleu_4", "CIDEr", "Unique"):
      assert got[key] == expected[key], key
  scalars = evaluator_lib.as_scalars(first)
  assert math.isnan(scalars["METEOR"]) and scalars["Bleu_1"] == expected["Bleu_1"]
  assert "errors" not in scalars
  err = capsys.readouterr().err
  # One line for the whole process, however many evaluations.
  assert err.count("\n") == 1, err
  assert err.startswith("[eval] commonsense: no `java` on PATH, METEOR skipped during training"), (
    err
  )


def test_text_metrics_nan_when_the_tokeniser_needs_java(monkeypatch, tmp_path, capsys):
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.setattr(evaluator_lib, "_warned_no_java", False)
  got = _score(_gens(["Arrive at the party."]))  # the period sends it to the Stanford jar
  assert got["Bleu_1"] is None and got["CIDEr"] is None and got["METEOR"] is None
  assert "`java`" in got["errors"]["text_metrics"]
  assert math.isnan(evaluator_lib.as_scalars(got)["Bleu_4"])
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "METEOR and the text metrics" in err, err
