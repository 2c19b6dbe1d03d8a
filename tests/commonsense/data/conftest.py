"""Shared fixtures: a small BPE trained on a fixed corpus."""

import pytest

from relations.commonsense.text import tokenizer as tokenizer_lib

CORPUS = [
  "<|b_ev|> <|det1|> is trying to talk to <|det2|> at the party <|e_ev|>",
  "<|b_pl|> at a fancy party <|e_pl|>",
  "<|before|> approach <|det3|> at an event <|e_in|>",
  "<|intent|> ask the woman on a date <|e_in|>",
  "<|after|> is trying to dance with the woman <|e_in|>",
] * 20


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("bpe")
  tokenizer_lib.train_bpe(tokenizer_lib.corpus_pieces(CORPUS), str(d), vocab_size=320)
  return str(d)


@pytest.fixture(scope="session")
def tok(tok_dir):
  return tokenizer_lib.VisualCometTokenizer.from_dir(tok_dir)
