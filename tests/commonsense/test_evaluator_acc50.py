"""Acc@50 through the evaluator: each candidate's score equals its full sequence's forward pass.

`Evaluator.acc50_scores` encodes each query's prompt once, each distinct candidate's continuation
once, and sends only the scored positions through the vocabulary projection. The reference here
is the training-side teacher-forced pass of every full candidate sequence (`task.encode` with the
candidate's relation and inference, labels on the inference only) and `sequence_scores`.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.commonsense import evaluator as evaluator_lib
from relations.commonsense import model as vl_generator
from relations.commonsense import task
from relations.commonsense.data import synthetic
from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.metrics import rank
from relations.commonsense.text import person_tags
from relations.commonsense.text import sequence
from relations.train import config_util

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_acc50_scores_equal_each_candidates_full_forward(tmp_path):
  data = str(tmp_path / "data")
  synthetic.generate(data, seed=3, train_images=2, val_images=3, test_images=1, verbose=False)
  config = config_util.load_config(os.path.join(_ROOT, "configs/commonsense.py") + ":variant=tiny")
  with config.unlocked():
    config.data.data_dir = str(tmp_path / "tfds")
    config.data.manual_dir = data
  ec = config.evals.val
  with ec.unlocked():
    ec.acc50_max_queries = 5
    ec.acc50_batch_size = 2  # 3 batches, the last one padded
  model = task.make_model(config)
  annots = records_lib.load_annotations(os.path.join(data, "val_annots.json"))
  ev = evaluator_lib.Evaluator(model, config, ec, str(tmp_path / "work"))
  queries = ev.acc50_queries(annots)
  assert len(queries) == 5 and all(len(q["candidates"]) == 50 for q in queries)
  src = task.make_source(config, "training", ec.split, image="jpeg")
  first = {k: src[i] for k, i in evaluator_lib.examples_by_record(src).items()}
  ex0 = first[next(iter(first))]
  batch0 = {k: v[None] for k, v in task.encode(ex0, config).items()}
  params = task.init_params(model, jax.tree.map(jnp.asarray, batch0), jax.random.key(0))

  got = ev.acc50_scores(params, annots, queries)
  assert [q for q, _ in got] == list(range(5))

  records = rank.expand_records(annots)
  rel = task.layout(config).relation_pos
  forward = jax.jit(lambda p, b: model.apply({"params": p}, b)[0])
  for q, (nll, n) in got:
    ctx = records[queries[q]["query"]]
    example = first[(ctx["event_idx"], ctx["inference_relation"], ctx["inference_text"])]
    rows = []
    for idx in queries[q]["candidates"]:
      cand = records[idx]
      _, name = person_tags.map_numbers_to_det_tokens(cand["inference_text"])
      enc = task.encode(
        example,
        config,
        inference_name=name,
        relation=cand["inference_relation"],
        text_given=bool(ec.text_given),
      )
      enc["labels"][: rel + 1] = sequence.IGNORE  # the inference only
      rows.append(enc)
    full = {k: jnp.asarray(np.stack([r[k] for r in rows])) for k in rows[0]}
    want_nll, want_n = vl_generator.sequence_scores(forward(params, full), full["labels"])
    np.testing.assert_array_equal(n, want_n)
    assert np.all(np.asarray(want_n) > 0)
    np.testing.assert_allclose(nll, want_nll, rtol=1e-5, atol=1e-5)
