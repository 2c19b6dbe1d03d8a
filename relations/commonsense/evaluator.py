# Copyright 2025 The relations Authors.
# SPDX-License-Identifier: Apache-2.0
"""Training-time evaluator: generate inferences, write the official JSON, score.

  config.evals.val = dict(type="commonsense", split="val",
      every_steps=0, text_given=True, method="sample", num_samples=5,
      top_p=0.9, top_k=0, temperature=1.0, max_new_tokens=20, batch_size=32,
      max_records=0, meteor=True, meteor_workers=0, acc50=True, acc50_seed=0,
      acc50_candidates="", acc50_batch_size=256, acc50_max_queries=0)

  method="beam" (the official `--do_sample 0`): num_beams = num_samples, and
  the optional `length_penalty` (default 1.0) and `early_stopping` (default
  False) of `generation.beam`; top_p/top_k/temperature are then unused.

`run(params, step)`:
1. decodes every (event, relation) of the `generation` builder split with the
   jitted KV-cached decoder (5 nucleus samples, top_p 0.9 by default, or the
   5 best beams; the prompt's prefill is shared by its samples / beams);
2. writes `<workdir>/step_<N>/<split>_sample_1_num_5_top_k_0_top_p_0.9.json`
   (`sample_0` for beam search; official format, person tags mapped back);
3. scores that file with the exact protocol
   (`captioning.protocol.score_generations`: BLEU-1..4, METEOR, CIDEr,
   Unique, Novel, ...) against `<manual_dir>/<split>_annots.json`;
4. Acc@50 (`captioning.rank`): seeded candidates (stored as data in the
   workdir, or `acc50_candidates`, e.g. the released val_rank_random_50.json)
   scored with the model's teacher-forced forward pass (the loss's);
and writes `metrics.json` next to the generations. Returns floats only.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.metrics import protocol
from relations.commonsense.metrics import rank
from relations.commonsense.generation import beam
from relations.commonsense.generation import decode
from relations.commonsense.generation import official
from relations.commonsense import model as vl_generator
from relations.commonsense import task
from relations.commonsense.text import person_tags

HEADLINE = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr",
            "Unique", "Novel", "Novel_normalised", "Acc@50", "Acc@50_plain_n")


def decode_config(eval_config, stop_id: int,
                  pad_id: int) -> decode.SampleConfig | beam.BeamConfig:
  """The decoding settings of `eval_config.method` ("sample" or "beam")."""
  method = eval_config.get("method", "sample")
  if method == "sample":
    return decode.SampleConfig(
        num_samples=int(eval_config.num_samples),
        max_new_tokens=int(eval_config.max_new_tokens),
        top_p=float(eval_config.top_p), top_k=int(eval_config.top_k),
        temperature=float(eval_config.temperature),
        stop_id=stop_id, pad_id=pad_id)
  if method == "beam":
    return beam.BeamConfig(
        num_beams=int(eval_config.num_samples),
        max_new_tokens=int(eval_config.max_new_tokens),
        length_penalty=float(eval_config.get("length_penalty", 1.0)),
        early_stopping=eval_config.get("early_stopping", False),
        stop_id=stop_id, pad_id=pad_id)
  raise ValueError(f"evals.method must be 'sample' or 'beam', got "
                   f"{method!r}")


def generation_file_name(eval_config) -> str:
  """Official name of the generation JSON for these eval settings."""
  return official.file_name(
      eval_config.split, int(eval_config.num_samples),
      int(eval_config.top_k), float(eval_config.top_p),
      do_sample=eval_config.get("method", "sample") == "sample")


def _pad_batch(examples: list[dict], size: int) -> dict[str, np.ndarray]:
  """Stacks and pads (by repeating the last example) to a fixed batch size."""
  ex = examples + [examples[-1]] * (size - len(examples))
  return {k: np.stack([e[k] for e in ex]) for k in ex[0]}


class Evaluator:
  """See the module docstring."""

  def __init__(self, model, config, eval_config, workdir):
    self.model = model
    self.config = config
    self.ec = eval_config
    self.workdir = workdir
    self.tok = task.tokenizer(config)
    self.layout = task.layout(config)
    self.decode_cfg = decode_config(eval_config, stop_id=self.tok.e_in_id,
                                    pad_id=self.tok.eos_id)
    self.decode_fn = decode.make_decode_fn(
        vl_generator.VLDecoder(model, self.layout.prompt_len), self.decode_cfg,
        prompt_len=self.layout.prompt_len)
    self.forward = jax.jit(
        lambda p, b: vl_generator.sequence_scores(
            model.apply({"params": p}, b, train=False)[0], b["labels"]))

  # ---------------------------------------------------------------- generation
  def generate(self, params, rng=None) -> list[dict]:
    """Official generation records for the eval split."""
    src = task.make_source(self.config, "generation", self.ec.split)
    n = len(src)
    if int(self.ec.get("max_records", 0)):
      n = min(n, int(self.ec.max_records))
    bs = int(self.ec.batch_size)
    rng = jax.random.key(int(self.config.seed)) if rng is None else rng
    out = []
    for start in range(0, n, bs):
      exs = [src[i] for i in range(start, min(start + bs, n))]
      enc = [task.encode(e, self.config, with_labels=False,
                         text_given=bool(self.ec.text_given)) for e in exs]
      batch = _pad_batch(enc, bs)
      toks = np.asarray(self.decode_fn(params, batch,
                                       jax.random.fold_in(rng, start)))
      for e, rows in zip(exs, toks):
        out.append(official.record(e, rows.tolist(), self.tok))
    return out

  # ---------------------------------------------------------------- Acc@50
  def _score_fn(self, params):
    src = task.make_source(self.config, "training", self.ec.split)
    first = {}
    for i in range(len(src)):
      ex = src[i]
      key = (int(ex["event_idx"]), task._s(ex["relation"]),  # pylint: disable=protected-access
             task._s(ex["inference_text"]))  # pylint: disable=protected-access
      first.setdefault(key, i)
    cache = {}

    def example(rec):
      key = (rec["event_idx"], rec["inference_relation"], rec["inference_text"])
      if key not in first:
        raise ValueError(f"{self.ec.split}: no builder example for record "
                         f"{key}")
      i = first[key]
      if i not in cache:
        cache[i] = src[i]
      return cache[i]

    bs = int(self.ec.acc50_batch_size)

    def score_fn(contexts, cands):
      enc = []
      for ctx, cand in zip(contexts, cands):
        _, name = person_tags.map_numbers_to_det_tokens(cand["inference_text"])
        enc.append(task.encode(example(ctx), self.config, inference_name=name,
                               relation=cand["inference_relation"],
                               text_given=bool(self.ec.text_given)))
        # Only the inference span is scored, never the EP spans.
        lab = enc[-1]["labels"]
        lab[:self.layout.relation_pos + 1] = -1
      nll, cnt = [], []
      for s in range(0, len(enc), bs):
        chunk = enc[s:s + bs]
        a, b = self.forward(params, _pad_batch(chunk, bs))
        nll.append(np.asarray(a)[:len(chunk)])
        cnt.append(np.asarray(b)[:len(chunk)])
      return np.concatenate(nll), np.concatenate(cnt)

    return score_fn

  def acc50(self, params, annotations, outdir) -> dict:
    path = self.ec.get("acc50_candidates") or ""
    if path:
      queries = rank.candidates_from_official(
          path, rank.expand_records(annotations))
    else:
      seed = int(self.ec.get("acc50_seed", 0))
      path = os.path.join(self.workdir,
                          f"{self.ec.split}_rank_random_50_seed{seed}.json")
      if os.path.exists(path):
        queries = rank.load_candidates(path)
      else:
        queries = rank.build_candidates(annotations, 50, seed)
        os.makedirs(self.workdir, exist_ok=True)
        rank.save_candidates(path, queries, seed, 50)
    del outdir
    cap = int(self.ec.get("acc50_max_queries", 0))
    if cap:  # a quick estimate on the first `cap` queries (demo)
      queries = queries[:cap]
    return rank.rank_accuracy(annotations, queries, self._score_fn(params),
                              batch_size=int(self.ec.acc50_batch_size) * 4)

  # ---------------------------------------------------------------- run
  def run(self, params, step) -> dict[str, float]:
    outdir = os.path.join(self.workdir, f"step_{step}")
    gens = self.generate(params)
    gen_path = os.path.join(outdir, generation_file_name(self.ec))
    if jax.process_index() != 0:
      return {}
    official.write(gen_path, gens)
    root = self.config.data.manual_dir
    annots = records_lib.load_annotations(
        os.path.join(root, f"{self.ec.split}_annots.json"))
    train_path = os.path.join(root, "train_annots.json")
    train = (records_lib.load_annotations(train_path)
             if os.path.exists(train_path) else None)
    workers = int(self.ec.get("meteor_workers", 0)) or None
    metrics = protocol.score_generations(
        annots, gens, train, meteor=bool(self.ec.meteor),
        meteor_workers=workers, gens_name=gen_path)
    if self.ec.get("acc50", True):
      metrics.update(self.acc50(params, annots, outdir))
    metrics["generations_file"] = gen_path
    tmp = os.path.join(outdir, "metrics.json.tmp")
    with open(tmp, "w") as f:
      json.dump(metrics, f, indent=2)
    os.replace(tmp, os.path.join(outdir, "metrics.json"))
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
