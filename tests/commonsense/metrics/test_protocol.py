"""score_generations equals the official protocol on pycocoevalcap 1.2."""

import json

import pytest

from relations.commonsense.metrics import cli as commonsense_cli
from relations.commonsense.metrics import protocol
from tests.commonsense.metrics import fixtures
from tests.commonsense.metrics import oracle

OFFICIAL_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "Unique", "Novel")


def test_all_metrics_equal_official_with_meteor():
  annots, gens, train = fixtures.dataset(seed=0, num_events=80)
  expected, _, _ = oracle.official_metrics(annots, gens, train)
  got = protocol.score_generations(annots, gens, train, meteor_workers=2)
  for key in OFFICIAL_KEYS:
    assert got[key] == expected[key], key
  assert got["num_skipped_pairs"] > 0  # Empty reference lists were skipped.
  assert got["num_hypotheses"] == 5 * got["num_scored_pairs"]
  assert 0 < got["Novel"] < 1 and 0 < got["Unique"] < 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_datasets_equal_official_without_meteor(seed):
  annots, gens, train = fixtures.dataset(seed=seed, num_events=40)
  expected, _, _ = oracle.official_metrics(annots, gens, train, meteor=False)
  got = protocol.score_generations(annots, gens, train, meteor=False)
  for key in OFFICIAL_KEYS:
    if key != "METEOR":
      assert got[key] == expected[key], key
  assert "METEOR" not in got


def test_normalised_novel_and_div_known_values():
  annots = [
    {"img_fn": "a.jpg", "event": "1 sits", "intent": ["rest"], "before": ["Walk in."], "after": []}
  ]
  gens = [
    {
      "event_idx": 0,
      "inference_relation": "before",
      "generations": ["walk in", "walk in", "sit down", "3 's hat", "<|det2|>'s hat"],
    },
    {"event_idx": 0, "inference_relation": "after", "generations": ["x"] * 5},
  ]
  train = [{"before": ["Walk in.", "1's hat"]}]
  got = protocol.score_generations(annots, gens, train, meteor=False, distinct_n=True)
  assert got["num_skipped_pairs"] == 1 and got["num_hypotheses"] == 5
  # Tokenised: walk in, walk in, sit down, 3 's hat, 2 's hat; use_same_id
  # maps both hats to "1's hat": 3 unique of 5.
  assert got["Unique"] == 3 / 5
  # Official: raw "Walk in." never matches "walk in"; "1's hat" does.
  assert got["Novel"] == pytest.approx(3 / 5)
  # Normalised: "walk in" matches too.
  assert got["Novel_normalised"] == pytest.approx(1 / 5)
  # After use_same_id: walk in | walk in | sit down | 1's hat | 1's hat.
  # Unigrams: 6 distinct of 10; bigrams: 3 distinct of 5.
  assert got["DIV1_set"] == pytest.approx(6 / 10)
  assert got["DIV1_corpus"] == pytest.approx(6 / 10)
  assert got["DIV2_set"] == pytest.approx(3 / 5)
  # The seed's DIV-S divides by the 10 words of the set instead.
  assert got["DIV1_S"] == pytest.approx(6 / 10)
  assert got["DIV2_S"] == pytest.approx(3 / 10)


def test_missing_java_still_scores_the_rest(monkeypatch, tmp_path):
  annots = [
    {
      "img_fn": "a.jpg",
      "event": "e",
      "intent": ["go home"],
      "before": ["walk in"],
      "after": ["sit down now"],
    }
  ]
  gens = [
    {
      "event_idx": 0,
      "inference_relation": r,
      "generations": ["go home", "walk in", "sit", "down", "now"],
    }
    for r in ("intent", "before", "after")
  ]
  expected, _, _ = oracle.official_metrics(annots, gens, meteor=False)
  monkeypatch.setenv("PATH", str(tmp_path))
  got = protocol.score_generations(annots, gens)
  assert got["METEOR"] is None
  assert "needs Java" in got["errors"]["METEOR"]
  for key in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "CIDEr", "Unique"):
    assert got[key] == expected[key], key


@pytest.mark.parametrize(
  "gens,message",
  [
    ([{"event_idx": 0, "generations": ["a"]}], "record 0: missing field 'inference_relation'"),
    (
      [{"event_idx": 5, "inference_relation": "intent", "generations": ["a"]}],
      "record 0: field 'event_idx'=5 is outside",
    ),
    (
      [{"event_idx": 0, "inference_relation": "xIntent", "generations": []}],
      "field 'inference_relation'='xIntent'",
    ),
    (
      [{"event_idx": 0, "inference_relation": "after", "generations": ["a"]}],
      "annotations: record 0: missing field 'after'",
    ),
    (
      [{"event_idx": 0, "inference_relation": "intent", "generations": "a"}],
      "field 'generations' must be a list of strings",
    ),
    (
      [{"event_idx": 0, "inference_relation": "intent", "generations": ["ok", "bad\u2029line"]}],
      r"generations: record 0: field 'generations'\[1\]",
    ),
  ],
)
def test_bad_input_errors(gens, message):
  annots = [{"img_fn": "a.jpg", "event": "e", "intent": ["go"], "before": ["x"]}]
  with pytest.raises(protocol.ProtocolError, match=message):
    protocol.score_generations(annots, gens, meteor=False)


def test_cli_writes_json_and_table(tmp_path, capsys):
  annots, gens, train = fixtures.dataset(seed=4, num_events=20)
  paths = {}
  for name, obj in (("val", annots), ("gens", gens), ("train", train)):
    paths[name] = tmp_path / f"{name}.json"
    paths[name].write_text(json.dumps(obj))
  out = tmp_path / "sub" / "metrics.json"
  commonsense_cli.main(
    [
      "--annotations",
      str(paths["val"]),
      "--generations",
      str(paths["gens"]),
      "--train-annotations",
      str(paths["train"]),
      "--output",
      str(out),
      "--no-meteor",
    ]
  )
  written = json.loads(out.read_text())
  expected, _, _ = oracle.official_metrics(annots, gens, train, meteor=False)
  for key in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "CIDEr", "Unique", "Novel"):
    assert written[key] == expected[key], key
  table = capsys.readouterr().out
  assert "Bleu_2" in table and "Novel_normalised" in table
  assert [p.name for p in out.parent.iterdir()] == ["metrics.json"]


def test_cli_names_bad_file(tmp_path, capsys):
  bad = tmp_path / "gens.json"
  bad.write_text("[{")
  val = tmp_path / "val.json"
  val.write_text("[]")
  assert commonsense_cli.main(["--annotations", str(val), "--generations", str(bad)]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"error: {bad}: malformed JSON at line 1 column 3")
  assert "Traceback" not in err and len(err.splitlines()) == 1
