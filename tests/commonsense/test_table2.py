"""The 16 model rows of VisualCOMET Table 2 (`configs/commonsense.py:get_hyper`) reach the model.

Each row is loaded as the sweep loads it (`configs/commonsense.py:tiny,<row>`) and checked end to
end through `task.encode` (training and test-time encodes, as the trainer and the evaluator call
it) and the model's input embeddings: which visual slots are filled, whether the person-grounding
tokens change the slots, which text segments are present, whether the EP loss labels event and
place, and whether text is withheld at test time.
"""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.commonsense import model as vl_generator
from relations.commonsense import task
from relations.commonsense.text import tokenizer as tokenizer_lib
from relations.report import LAYOUTS
from relations.train import config_util
from tests.commonsense.test_task import CORPUS, _example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "commonsense.py")
_module = config_util._load_module(CONFIG)  # pylint: disable=protected-access
ROWS = _module.get_hyper("table2")

# The paper's rows (seed 003, Table 2): modalities, text given at test, PG, EP loss.
PAPER = [
  ("Place", "Yes"),
  ("Event", "Yes"),
  ("Event + Place", "Yes"),
  ("Image + Place", "Yes"),
  ("Image + Event", "Yes"),
  ("Image + Event + Place", "Yes"),
  ("Image + Event + Place + EP Loss", "Yes"),
  ("Image + Event + Place + PG", "Yes"),
  ("Image + Event + Place + PG + EP Loss", "Yes"),
  ("No Input", "No"),
  ("Image", "No"),
  ("Image + PG", "No"),
  ("Image + Event + Place", "No"),
  ("Image + Event + Place + EP Loss", "No"),
  ("Image + Event + Place + PG", "No"),
  ("Image + Event + Place + PG + EP Loss", "No"),
]


def _expected(modalities, text_given):
  parts = modalities.split(" + ")
  return {
    "image": "Image" in parts,
    "event": "Event" in parts,
    "place": "Place" in parts,
    "pg": "PG" in parts,
    "ep": "EP Loss" in parts,
    "text_at_test": text_given == "Yes",
  }


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("bpe")
  tokenizer_lib.train_bpe(tokenizer_lib.corpus_pieces(CORPUS), str(d), vocab_size=300)
  return str(d)


def _config(row, tokenizer_dir):
  return config_util.load_config(
    f"{CONFIG}:tiny,{row}", [f"data.tokenizer_dir={tokenizer_dir}", "model.lm.dropout=0.0"]
  )


@functools.lru_cache(maxsize=None)
def _embed_fn(visual, pg, tokenizer_dir):
  """(jitted input_embeddings, params) of the tiny model one row family builds; shared by rows
  that build the same model so that the 16 rows cost 3 initialisations."""
  config = _config("inputs=none" if visual == "none" else f"pg={str(pg).lower()}", tokenizer_dir)
  model = task.make_model(config)
  batch = {k: v[None] for k, v in task.encode(_example(), config).items()}
  params = task.init_params(model, batch, jax.random.key(0))
  fn = jax.jit(
    lambda p, b: model.apply({"params": p}, b, method=vl_generator.VLGenerator.input_embeddings)
  )
  return fn, params


def test_get_hyper_lists_the_16_rows_of_table2_in_the_papers_order():
  assert len(ROWS) == 16 and len(set(ROWS)) == 16
  assert [tuple(_module.describe_row(r).values()) for r in ROWS] == PAPER
  # The report's reference lines carry the same labels, so every row has its published numbers.
  refs = [labels for labels, _ in LAYOUTS["commonsense"]["references"]]
  assert refs[:16] == PAPER and refs[16] == ("GT", "-")


def test_unknown_hyper_names_the_available_ones():
  with pytest.raises(ValueError, match=r"Unknown hyper 'table3'; available: table2"):
    _module.get_hyper("table3")


@pytest.mark.parametrize("index", range(16), ids=[" / ".join(p) for p in PAPER])
def test_table2_row_reaches_the_model(index, tokenizer_dir):
  exp = _expected(*PAPER[index])
  config = _config(ROWS[index], tokenizer_dir)
  tok = task.tokenizer(config)
  lay = task.layout(config)
  event = slice(lay.event_start, lay.place_start)
  place = slice(lay.place_start, lay.relation_pos)

  # Training encode (what the trainer's preprocess_train returns).
  train = task.encode(_example(), config)
  assert bool(train["slot_mask"].any()) == exp["image"]
  assert (train["input_ids"][event] != tok.eos_id).any() == exp["event"]
  assert (train["input_ids"][place] != tok.eos_id).any() == exp["place"]
  assert (tok.e_ev_id in train["labels"][event]) == (exp["ep"] and exp["event"])
  assert (tok.e_pl_id in train["labels"][place]) == (exp["ep"] and exp["place"])
  assert train["labels"][lay.relation_pos + 1] != -1  # the inference is always a target

  # Test-time encode, with the evaluator's text_given (withheld text becomes eos padding).
  test = task.encode(
    _example(), config, with_labels=False, text_given=bool(config.evals.val.text_given)
  )
  assert (test["input_ids"][event] != tok.eos_id).any() == (exp["event"] and exp["text_at_test"])
  assert (test["input_ids"][place] != tok.eos_id).any() == (exp["place"] and exp["text_at_test"])
  assert not test["token_mask"][event].any() or exp["text_at_test"]

  # The model: slots written at positions 1..K only with the image; PG moves them.
  model = task.make_model(config)
  assert model.visual == ("features" if exp["image"] else "none")
  assert model.person_grounding == exp["pg"]
  fn, params = _embed_fn(model.visual, model.person_grounding, tokenizer_dir)
  batch = jax.tree.map(lambda v: jnp.asarray(v[None]), test)
  emb, key_mask = fn(params, batch)
  eos_row = params["lm"]["wte"]["embedding"][tok.eos_id]
  slots = np.asarray(emb[0, 1:4])  # image + the two person detections of _example
  assert (not np.allclose(slots, eos_row, atol=1e-6)) == exp["image"]
  assert bool(key_mask[0, 1:4].all()) == exp["image"]
  moved = dict(batch, slot_person_ids=jnp.zeros_like(batch["slot_person_ids"]))
  emb2, _ = fn(params, moved)
  assert (not np.allclose(emb2[0, 1:4], slots, atol=1e-6)) == (exp["image"] and exp["pg"])
