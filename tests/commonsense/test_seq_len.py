"""`max_seq_len`: 128 by default (official code), 256 (the paper's value) as the `seq_len` arg."""

import os

import numpy as np
import pytest

from relations.commonsense import task
from relations.commonsense.text import tokenizer as tokenizer_lib
from relations.train import config_util
from tests.commonsense.test_task import CORPUS, _example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "commonsense.py")


def _load(arg, overrides=()):
  return config_util.load_config(f"{CONFIG}:{arg}", list(overrides))


@pytest.mark.parametrize("variant", ["small", "medium", "large"])
def test_paper_variants_default_to_128_and_take_256(variant):
  assert _load(variant).layout.max_seq_len == 128
  assert _load(f"{variant},seq_len=256").layout.max_seq_len == 256
  # The arg changes only the width, never the official segment widths.
  a, b = dict(_load(variant).layout), dict(_load(f"{variant},seq_len=256").layout)
  a.pop("max_seq_len"), b.pop("max_seq_len")
  assert a == b == {"num_max_boxes": 15, "max_event": 39, "max_place": 22, "max_inference": 23}


def test_too_short_and_negative_seq_len_are_refused():
  with pytest.raises(ValueError, match=r"'seq_len': 60 is shorter than this layout's prompt"):
    _load("small,seq_len=60")
  with pytest.raises(ValueError, match=r"'seq_len': must be >= 0"):
    _load("small,seq_len=-1")


def test_longer_sequence_only_adds_padding(tmp_path):
  tokenizer_lib.train_bpe(tokenizer_lib.corpus_pieces(CORPUS), str(tmp_path), vocab_size=300)
  over = [f"data.tokenizer_dir={tmp_path}"]
  short = _load("tiny", over)
  long = _load("tiny,seq_len=96", over)
  assert short.layout.max_seq_len == 40 and long.layout.max_seq_len == 96
  assert long.model.lm.max_len == 96  # the tiny LM gets the positions it needs
  a, b = task.encode(_example(), short), task.encode(_example(), long)
  tok = task.tokenizer(short)
  assert a["input_ids"].shape == (40,) and b["input_ids"].shape == (96,)
  np.testing.assert_array_equal(b["input_ids"][:40], a["input_ids"])
  assert (b["input_ids"][40:] == tok.eos_id).all()
  np.testing.assert_array_equal(b["labels"][:40], a["labels"])
  assert (b["labels"][40:] == -1).all()
