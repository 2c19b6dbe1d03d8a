"""DIV per the seed (distinct n-grams / words per set), distinct-n as an option, the GT row."""

import json
import random

import numpy as np
import pytest

from relations.commonsense.metrics import cli as commonsense_cli
from relations.commonsense.metrics import diversity, protocol

# 8 words; unigrams {a, b, c, d}; bigrams (a b), (a b), (a c): 2 distinct of 3.
TOY = ["a b", "a b", "a c", "d", "a"]


def test_toy_set_known_values_for_both_definitions():
  assert diversity.div_s(TOY, 1) == 4 / 8
  assert diversity.div_s(TOY, 2) == 2 / 8  # the seed: / words
  assert diversity.distinct_n(TOY, 2) == 2 / 3  # distinct-n: / bigrams
  assert diversity.distinct_n(TOY, 1) == 4 / 8  # for n = 1 the two agree
  assert diversity.div_s(["", ""], 1) is None
  # Person tags are one tag: "1 's hat" and "2 's hat" are the same two words.
  assert diversity.div_s(["1 's hat", "2 's hat"], 1) == 2 / 4


def test_div_scores_mean_over_sets_and_option():
  groups = [TOY, ["x y z", "x y z"], ["", ""]]  # the empty set is left out of the mean
  got = diversity.div_scores(groups)
  assert got == {
    "DIV1_S": pytest.approx((0.5 + 3 / 6) / 2),
    "DIV2_S": pytest.approx((0.25 + 2 / 6) / 2),
  }
  both = diversity.div_scores(groups, distinct=True)
  assert both["DIV2_set"] == pytest.approx((2 / 3 + 2 / 4) / 2)
  assert both["DIV2_corpus"] == pytest.approx(4 / 7)  # (a b)(a c)(x y)(y z) of 7 bigrams
  assert both["DIV1_S"] == got["DIV1_S"]


def test_div_s_equals_naive_definition_on_random_sets():
  rng = random.Random(0)
  words = ["a", "b", "c", "1", "2", "'s", "hat"]
  for _ in range(300):
    group = [
      " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
      for _ in range(rng.randint(1, 5))
    ]
    for n in (1, 2):
      toks = [diversity.use_same_id(s).split() for s in group]
      grams = {tuple(t[i : i + n]) for t in toks for i in range(len(t) - n + 1)}
      num_words = sum(len(t) for t in toks)
      want = len(grams) / num_words if num_words else None
      assert diversity.div_s(group, n) == want


ANNOTS = [
  {
    "img_fn": "a.jpg",
    "event": "1 sits",
    "intent": ["Rest a while.", "rest a while"],
    "before": ["Walk in.", "walk in the room", "sit down"],
    "after": [],
  },
  {"img_fn": "b.jpg", "event": "2 runs", "intent": ["win the race"], "before": [], "after": []},
]
TRAIN = [{"before": ["walk in the room", "win the race"]}]


def test_gt_row_known_values():
  got = protocol.ground_truth_metrics(ANNOTS, TRAIN, distinct_n=True)
  # Tokenised: rest a while | rest a while ; walk in | walk in the room | sit down ; win the race
  assert got["num_sentences"] == 6 and got["num_sets"] == 3
  assert got["Unique"] == pytest.approx(5 / 6)
  assert got["Novel"] == pytest.approx(4 / 6)  # official: raw training sentences
  assert got["Novel_normalised"] == pytest.approx(4 / 6)
  div1 = np.mean([3 / 6, 6 / 8, 3 / 3])  # distinct words / words per set
  div2 = np.mean([2 / 6, 4 / 8, 2 / 3])
  assert got["DIV1_S"] == pytest.approx(div1) and got["DIV2_S"] == pytest.approx(div2)
  assert got["DIV2_set"] == pytest.approx(np.mean([2 / 4, 4 / 5, 2 / 2]))
  assert got["Vocab"] == 11 and got["Sent_Len"] == pytest.approx(17 / 6)


def test_gt_row_refuses_annotations_without_sentences():
  with pytest.raises(protocol.ProtocolError, match="val.json: no intent / before / after"):
    protocol.ground_truth_metrics([{"event": "x"}], annots_name="val.json")
  with pytest.raises(protocol.ProtocolError, match=r"val.json: record 0: field 'intent' must be"):
    protocol.ground_truth_metrics([{"intent": "x"}], annots_name="val.json")


def test_cli_gt_row_and_distinct_option(tmp_path, capsys):
  annots, gens, out = tmp_path / "val.json", tmp_path / "gens.json", tmp_path / "m.json"
  annots.write_text(json.dumps(ANNOTS))
  gens.write_text(
    json.dumps([{"event_idx": 0, "inference_relation": "before", "generations": TOY}])
  )
  argv = ["--annotations", str(annots), "--generations", str(gens), "--no-meteor"]
  plain = commonsense_cli.run(argv)
  assert plain["DIV2_S"] == 2 / 8 and "DIV2_set" not in plain and "GT" not in plain
  got = commonsense_cli.run(argv + ["--distinct-n", "--gt-row", "--output", str(out)])
  assert got["DIV2_set"] == pytest.approx(2 / 3)
  written = json.loads(out.read_text())
  assert written["GT"]["num_sets"] == 3 and written["GT"]["DIV1_S"] == pytest.approx(
    np.mean([3 / 6, 6 / 8, 3 / 3])
  )
  printed = capsys.readouterr().out
  assert "GT (references scored as generations)" in printed and "DIV2_S" in printed
