"""Person-tag mapping: known examples and the official quirks."""

import pytest

from relations.commonsense.text import person_tags


def fwd(s, m=None):
  return person_tags.map_numbers_to_det_tokens(s, m)


def test_spec_examples():
  # "1's" -> "<|det1|>  's" (the apostrophe is split off twice: double space).
  assert fwd("1's hat")[1] == "<|det1|>  's hat"
  assert fwd("man, woman")[1] == "man , woman"
  assert fwd("3.")[1] == "<|det3|>."
  assert fwd("is 2 ok?")[1] == "is <|det2|> ok ?"


def test_readme_event():
  p2n, s = fwd("1 is trying to talk to the pretty woman in front of him")
  assert s == "<|det1|> is trying to talk to the pretty woman in front of him"
  assert p2n == {"1": "<|det1|>"}
  p2n, s = fwd("approach 3 at an event", p2n)
  assert s == "approach <|det3|> at an event"
  assert p2n == {"1": "<|det1|>", "3": "<|det3|>"}


def test_non_person_numbers_and_large_tags():
  # Every all-digit token is converted, also counts; there is no upper bound
  # in the mapping (tags >= 50 are not tokenizer special tokens).
  p2n, s = fwd("2 people wait for 57 minutes")
  assert s == "<|det2|> people wait for <|det57|> minutes"
  assert person_tags.tag_numbers(p2n) == [2, 57]
  back = person_tags.replace_names(s, person_tags.invert(p2n))
  assert back == "2 people wait for 57 minutes"


def test_mixed_tokens_not_converted():
  # "1st" and "3rd" are not all-digit; "1,2" splits at the comma.
  assert fwd("1st and 3rd")[1] == "1st and 3rd"
  assert fwd("1,2 and 4")[1] == "<|det1|> , <|det2|> and <|det4|>"


def test_leading_zero_tag():
  p2n, s = fwd("07 waves")
  assert s == "<|det7|> waves"
  assert p2n == {"07": "<|det7|>"}
  # Backward mapping restores the written form, as the official map does.
  assert person_tags.replace_names("greet <|det7|>", person_tags.invert(p2n)) == "greet 07"


def test_backward_unknown_tag_becomes_number():
  n2p = {"<|det1|>": "1"}
  assert person_tags.replace_names("<|det1|> hugs <|det12|>", n2p) == "1 hugs 12"
  # det1 must not clobber det10..det19.
  n2p = {"<|det1|>": "1", "<|det10|>": "10"}
  assert person_tags.replace_names("<|det10|> and <|det1|>", n2p) == "10 and 1"


def test_superscript_digit_fails_like_official():
  with pytest.raises(ValueError):
    fwd("x \u00b2 is big")


def test_finetune_expansion_order_and_maps():
  rec = {
    "img_fn": "a/b.jpg",
    "event": "1 talks to 2",
    "place": "home",
    "intent": ["thank 2"],
    "before": ["meet 3", "sit"],
    "after": [],
  }
  out = person_tags.encode_finetune_record(rec, event_idx=5)
  assert [(r["inference_relation"], r["inference_text"]) for r in out] == [
    ("intent", "thank 2"),
    ("before", "meet 3"),
    ("before", "sit"),
  ]
  assert all(r["event_idx"] == 5 for r in out)
  assert out[1]["inference_text_name"] == "meet <|det3|>"
  # Training maps hold event tags plus the tags of *this* inference.
  assert out[1]["person2name"] == {"1": "<|det1|>", "2": "<|det2|>", "3": "<|det3|>"}
  assert out[2]["person2name"] == {"1": "<|det1|>", "2": "<|det2|>"}
  assert "intent" not in out[0] and out[0]["place"] == "home"


def test_generation_expansion_always_three():
  rec = {"event": "1 talks to 2", "place": "home", "intent": [], "before": ["meet 3", "call 4"]}
  out = person_tags.encode_generation_record(rec, event_idx=0)
  assert [r["inference_relation"] for r in out] == ["intent", "before", "after"]
  assert "inference_text" not in out[0] and "inference_text" not in out[2]
  assert out[1]["inference_text_name"] == ["meet <|det3|>", "call <|det4|>"]
  # The official generation map also includes the references' tags.
  assert person_tags.tag_numbers(out[1]["person2name"]) == [1, 2, 3, 4]
  assert person_tags.tag_numbers(out[0]["person2name"]) == [1, 2]
  assert out[1]["name2person"]["<|det4|>"] == "4"
