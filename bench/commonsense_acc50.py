"""Acc@50 scoring speed: shared prompt (computed once per query) vs one forward per candidate.

Each Acc@50 query scores 50 candidate inferences that share one prompt (image slots, event,
place: the 78 positions before the relation token in the official layout). The per-candidate path
is the teacher-forced forward pass of each full 128-position candidate sequence (what the
evaluator ran before); the shared path (`VLGenerator.continuation_scores`, what it runs now) runs
the prompt once and the 50 continuations (relation token + inference + `<|e_in|>`, cut after the
last label to a multiple of 8: 24 positions for the official 23-token inference segment) as one
batch attending to the prompt's keys/values, and only the positions whose next token is scored
(the inference's, about half of the continuation positions) go through the vocabulary projection,
which is most of a narrow model's work (`tiny`: 64 x 50k per position against ~0.1M in its two
blocks). The figure without that selection is printed too. Both on a randomly initialised model of the config's
size with random token ids (speed does not depend on the weights), and the scores of both paths
are compared.

  python bench/commonsense_acc50.py [--configs tiny,small] [--queries 1] [--chunk 10]

Prints per config the seconds per query of both paths, the largest score difference, and
`ratio shared-prompt / per-candidate (<config>): X.XXx` (speed-up, higher is better).
"""

import argparse
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from relations.commonsense import gpt2  # pylint: disable=g-import-not-at-top
from relations.commonsense import model as vl_generator  # pylint: disable=g-import-not-at-top
from relations.commonsense.text import sequence  # pylint: disable=g-import-not-at-top

NUM_CANDIDATES = 50


def _setting(name):
  """(model, layout) of configs/commonsense.py's `name` variant (features, PG, masked)."""
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs"))
  import commonsense as cfg_mod  # pylint: disable=g-import-not-at-top

  c = cfg_mod.get_config(f"variant={name}")
  lm = dict(c.model.lm)
  lm["vocab_size"] = gpt2.VISUALCOMET_VOCAB
  lm["dropout"] = 0.0
  model = vl_generator.Model(
    lm_variant=c.model.lm_variant,
    lm=lm,
    visual="features",
    num_slots=c.layout.num_max_boxes,
    visual_dropout=0.0,
  )
  return model, sequence.Layout(**dict(c.layout))


def _inputs(layout, g, rng):
  """G queries' prompts and 50 candidates each (inference lengths 3..layout.max_inference)."""
  l, k, rel = layout.max_seq_len, layout.num_max_boxes, layout.relation_pos
  eos = 50256
  ids = rng.integers(0, 50000, (g, l)).astype(np.int32)
  ids[:, 1 : 1 + k] = eos
  cont = np.full((g, NUM_CANDIDATES, l - rel), eos, np.int32)
  labels = np.full((g, NUM_CANDIDATES, l - rel), -1, np.int32)
  for q in range(g):
    for c in range(NUM_CANDIDATES):
      n = int(rng.integers(3, layout.max_inference + 1))  # relation .. <|e_in|>
      cont[q, c, :n] = rng.integers(0, 50000, n)
      labels[q, c, 1:n] = cont[q, c, 1:n]
  last = int(np.max(np.nonzero(labels != -1)[2]))
  width = min(l - rel, -(-(last + 1) // 8) * 8)
  prompt = {
    "input_ids": ids,
    "token_mask": ids != eos,
    "slot_mask": np.ones((g, k), bool),
    "slot_person_ids": np.zeros((g, k), np.int32),
    "visual_features": rng.normal(size=(g, k, 2048)).astype(np.float32),
  }
  pos = [
    vl_generator.continuation_score_positions(labels[q, :, :width], NUM_CANDIDATES)
    for q in range(g)
  ]
  k = max(len(p) for p in pos)  # the evaluator batches queries of one K
  shared = dict(
    prompt,
    cand_ids=cont[:, :, :width],
    cand_labels=labels[:, :, :width],
    cand_mask=cont[:, :, :width] != eos,
    cand_score_pos=np.stack([np.pad(p, (0, k - len(p)), constant_values=-1) for p in pos]),
  )
  full_ids = np.repeat(ids, NUM_CANDIDATES, 0)
  full_ids[:, rel:] = cont.reshape(g * NUM_CANDIDATES, -1)
  full_lab = np.full_like(full_ids, -1)
  full_lab[:, rel:] = labels.reshape(g * NUM_CANDIDATES, -1)
  per = {k2: np.repeat(v, NUM_CANDIDATES, 0) for k2, v in prompt.items()}
  per.update(input_ids=full_ids, token_mask=full_ids != eos, labels=full_lab)
  return shared, per, width


def bench(name, queries, chunk, repeats):
  model, layout = _setting(name)
  rng = np.random.default_rng(0)
  shared, per, width = _inputs(layout, queries, rng)
  params = jax.jit(
    lambda r: model.init(
      r, jax.tree.map(lambda x: x[:1], {k: jnp.asarray(v) for k, v in per.items() if k != "labels"})
    )["params"]
  )(jax.random.key(0))
  rel = layout.relation_pos
  shared_fn = jax.jit(
    lambda p, b: model.apply(
      {"params": p}, b, rel, NUM_CANDIDATES, method=vl_generator.VLGenerator.continuation_scores
    )
  )
  per_fn = jax.jit(
    lambda p, b: vl_generator.sequence_scores(model.apply({"params": p}, b)[0], b["labels"])
  )

  all_positions = {k2: v for k2, v in shared.items() if k2 != "cand_score_pos"}

  def run_shared(batch=shared):
    return np.asarray(shared_fn(params, batch)[0]).reshape(-1)

  def run_per():
    out = []
    for s in range(0, len(per["input_ids"]), chunk):
      out.append(np.asarray(per_fn(params, {k: v[s : s + chunk] for k, v in per.items()})[0]))
    return np.concatenate(out)

  a, b, a_all = run_shared(), run_per(), run_shared(all_positions)  # compile + warm up
  t0 = time.perf_counter()
  for _ in range(repeats):
    a = run_shared()
  t_shared = (time.perf_counter() - t0) / repeats
  t0 = time.perf_counter()
  for _ in range(repeats):
    a_all = run_shared(all_positions)
  t_all = (time.perf_counter() - t0) / repeats
  t0 = time.perf_counter()
  for _ in range(repeats):
    b = run_per()
  t_per = (time.perf_counter() - t0) / repeats
  print(
    f"[{name}] layout L={layout.max_seq_len}, prompt {rel}, continuation {width}, "
    f"{queries} quer{'y' if queries == 1 else 'ies'} x {NUM_CANDIDATES} candidates "
    f"(per-candidate path in chunks of {chunk})"
  )
  print(
    f"[{name}] scored positions: {int((shared['cand_score_pos'] >= 0).sum()) / queries:.0f} "
    f"per query (K = {shared['cand_score_pos'].shape[1]}) of {NUM_CANDIDATES * width} "
    "continuation positions"
  )
  print(f"[{name}] shared prompt : {t_shared / queries:8.3f} s/query")
  print(
    f"[{name}]   (all continuation positions through the LM head: {t_all / queries:.3f} s/query)"
  )
  print(f"[{name}] per candidate : {t_per / queries:8.3f} s/query")
  print(f"[{name}] max |score difference| (nats, summed NLL): {np.max(np.abs(a - b)):.2e}")
  print(f"[{name}]   (all positions: {np.max(np.abs(a_all - b)):.2e})")
  print(f"ratio shared-prompt / per-candidate ({name}): {t_per / t_shared:.2f}x")


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--configs", default="tiny,small")
  ap.add_argument("--queries", type=int, default=1)
  ap.add_argument("--chunk", type=int, default=10, help="candidate sequences per forward call")
  ap.add_argument("--repeats", type=int, default=1)
  args = ap.parse_args()
  print(
    "uptime before:",
    subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip(),
  )
  for name in args.configs.split(","):
    bench(name, args.queries, args.chunk, args.repeats)
  print(
    "uptime after :",
    subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip(),
  )


if __name__ == "__main__":
  main()
