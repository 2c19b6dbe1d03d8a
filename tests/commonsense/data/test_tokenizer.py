"""Tokenizer: special-token ids, 2.4.1 splitting, decoding, BPE file format."""

import json
import os

import pytest

from relations.commonsense.text import tokenizer as tokenizer_lib


def _gpt2_sized_files(d):
  """A vocab with GPT-2's size (50,257, eos last) and a few real merges."""
  byte_chars = sorted(set(tokenizer_lib.bytes_to_unicode().values()))
  vocab = {c: i for i, c in enumerate(byte_chars)}
  merges = [("Ġ", "t"), ("Ġt", "o"), ("i", "s")]
  for a, b in merges:
    vocab[a + b] = len(vocab)
  while len(vocab) < 50256:
    vocab[f"filler{len(vocab)}"] = len(vocab)
  vocab["<|endoftext|>"] = 50256
  with open(os.path.join(d, "vocab.json"), "w") as f:
    json.dump(vocab, f)
  with open(os.path.join(d, "merges.txt"), "w") as f:
    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
  return vocab


def test_gpt2_special_token_ids(tmp_path):
  vocab = _gpt2_sized_files(str(tmp_path))
  tok = tokenizer_lib.VisualCometTokenizer.from_dir(str(tmp_path))
  assert tok.base_vocab_size == 50257 and tok.vocab_size == 50317
  assert tok.eos_id == tok.pad_id == 50256
  want = {
    "<|b_img|>": 50257,
    "<|e_img|>": 50258,
    "<|b_ev|>": 50259,
    "<|e_ev|>": 50260,
    "<|b_pl|>": 50261,
    "<|e_pl|>": 50262,
    "<|e_in|>": 50263,
    "<|before|>": 50264,
    "<|intent|>": 50265,
    "<|after|>": 50266,
    "<|det0|>": 50267,
    "<|det49|>": 50316,
  }
  assert {t: tok.token_to_id(t) for t in want} == want
  assert tok.relation_ids == {"before": 50264, "intent": 50265, "after": 50266}
  assert tok.det_id(1) == 50268 and tok.det_id(50) == 50256
  # Merges apply; the word after a special token has no "Ġ".
  assert tok.tokenize("<|b_ev|> is to is") == ["<|b_ev|>", "is", "Ġto", "Ġ", "is"]
  assert tok.encode("is") == [vocab["is"]]


def test_tokenizer_json_equals_files(tmp_path):
  _gpt2_sized_files(str(tmp_path))
  a = tokenizer_lib.VisualCometTokenizer.from_dir(str(tmp_path))
  a._tok.save(str(tmp_path / "full.json"))
  # A plain HF tokenizer.json of the base model (no extra added tokens).
  spec = json.load(open(tmp_path / "full.json"))
  spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] == "<|endoftext|>"]
  os.makedirs(tmp_path / "hf")
  with open(tmp_path / "hf" / "tokenizer.json", "w") as f:
    json.dump(spec, f)
  b = tokenizer_lib.VisualCometTokenizer.from_dir(str(tmp_path / "hf"))
  s = "<|b_ev|> <|det3|> is to it <|e_ev|> <|det50|>"
  assert a.encode(s) == b.encode(s) and b.vocab_size == 50317


def test_split_like_transformers_241(tok):
  # Spec 2.1 example: pieces between special tokens are stripped.
  assert tok.tokenize("<|b_ev|> <|det1|> is trying") == ["<|b_ev|>", "<|det1|>", "is", "Ġtrying"]
  assert tok.split_on_special("a<|e_in|><|e_in|>  b <|endoftext|>") == [
    "a",
    "<|e_in|>",
    "<|e_in|>",
    "b",
    "<|endoftext|>",
  ]
  # <|det50|> is not a special token: byte-level text.
  toks = tok.tokenize("<|det50|>")
  assert len(toks) > 1 and "".join(toks) == "<|det50|>"


def test_bpe_files_format(tok_dir, tok):
  vocab = json.load(open(os.path.join(tok_dir, "vocab.json")))
  assert vocab["<|endoftext|>"] == len(vocab) - 1 == tok.eos_id
  assert sorted(vocab.values()) == list(range(len(vocab)))
  lines = open(os.path.join(tok_dir, "merges.txt")).read().splitlines()
  assert lines[0].startswith("#version")
  assert all(len(l.split(" ")) == 2 for l in lines[1:])
  assert tok.vocab_size == len(vocab) + 60
  assert tok.token_to_id("<|b_img|>") == len(vocab)
  assert tok.token_to_id("<|det49|>") == len(vocab) + 59


def test_decode_official(tok):
  ids = tok.encode("<|b_ev|> <|det1|> is trying to talk to <|det2|>  's party . <|e_ev|>")
  assert tok.decode(ids) == ("<|b_ev|> <|det1|> is trying to talk to <|det2|>'s party. <|e_ev|>")
  assert tok.decode(ids, skip_special_tokens=True) == (
    "<|det1|> is trying to talk to <|det2|>'s party."
  )


def test_decode_generation(tok):
  body = tok.encode("ask <|det2|> on a date")
  e_in, eos = tok.e_in_id, tok.eos_id
  gen = body + [e_in] + [tok.encode("party")[0]] * (20 - len(body) - 1)
  assert tok.decode_generation(gen, {"<|det2|>": "2"}) == "ask 2 on a date"
  # Unknown tags still become bare numbers.
  assert tok.decode_generation(tok.encode("talk to <|det7|>") + [eos] * 16, {}) == "talk to 7"
  # No <|e_in|>: the 20th token is overwritten, 19 survive.
  party = [tok.token_to_id("Ġparty")]
  assert tok.decode_generation(party * 20) == " ".join(["party"] * 19)


def test_missing_files_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="vocab.json"):
    tokenizer_lib.VisualCometTokenizer.from_dir(str(tmp_path))
