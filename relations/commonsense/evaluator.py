"""Training-time evaluator: generate inferences, write the official JSON, score.

  config.evals.val = dict(type="commonsense", split="val",
      every_steps=0, text_given=True, method="sample", num_samples=5,
      top_p=0.9, top_k=0, temperature=1.0, max_new_tokens=20, batch_size=32,
      max_records=0, meteor=True, meteor_workers=0, acc50=True, acc50_seed=0,
      acc50_candidates="", acc50_batch_size=4, acc50_max_queries=0)

  method="beam" (the official `--do_sample 0`): num_beams = num_samples, and
  the optional `length_penalty` (default 1.0) and `early_stopping` (default
  False) of `generation.beam`; top_p/top_k/temperature are then unused.

`run(params, step)`:
1. decodes every (event, relation) of the `generation` builder split with the
   jitted KV-cached decoder (5 nucleus samples, top_p 0.9 by default, or the
   5 best beams; each prompt runs once and its samples / beams attend to its
   one copy of the prompt's keys/values), sharded over processes and local
   devices (`relations.train.eval_loop`); record i samples with the key
   fold_in(key(config.seed), i);
2. writes `<workdir>/step_<N>/<split>_sample_1_num_5_top_k_0_top_p_0.9.json`
   (`sample_0` for beam search; official format, person tags mapped back);
3. scores that file with the exact protocol
   (`captioning.protocol.score_generations`: BLEU-1..4, METEOR, CIDEr,
   Unique, Novel, ...) against `<manual_dir>/<split>_annots.json`;
4. Acc@50 (`captioning.rank`): seeded candidates (stored as data in the
   workdir, or `acc50_candidates`, e.g. the released val_rank_random_50.json)
   scored with the model's teacher-forced forward pass, the query's prompt
   computed once and its candidates scored as one batch continuing from its
   keys/values (`VLGenerator.continuation_scores`; `acc50_batch_size`
   queries per call);
and writes `metrics.json` next to the generations (process 0, once).
Returns floats only, the same on every process.
"""

from __future__ import annotations

import math
import os
import shutil
import sys

import jax
import numpy as np

from relations import io_util, remote_inputs
from relations.commonsense import model as vl_generator
from relations.commonsense import task
from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.generation import beam, decode, official
from relations.commonsense.metrics import java as java_lib
from relations.commonsense.metrics import protocol, rank
from relations.commonsense.text import person_tags, sequence
from relations.train import eval_loop, summaries

HEADLINE = (
  "Bleu_1",
  "Bleu_2",
  "Bleu_3",
  "Bleu_4",
  "METEOR",
  "CIDEr",
  "Unique",
  "Novel",
  "Novel_normalised",
  "Acc@50",
  "Acc@50_plain_n",
)


def decode_config(eval_config, stop_id: int, pad_id: int) -> decode.SampleConfig | beam.BeamConfig:
  """The decoding settings of `eval_config.method` ("sample" or "beam")."""
  method = eval_config.get("method", "sample")
  if method == "sample":
    return decode.SampleConfig(
      num_samples=int(eval_config.num_samples),
      max_new_tokens=int(eval_config.max_new_tokens),
      top_p=float(eval_config.top_p),
      top_k=int(eval_config.top_k),
      temperature=float(eval_config.temperature),
      stop_id=stop_id,
      pad_id=pad_id,
    )
  if method == "beam":
    return beam.BeamConfig(
      num_beams=int(eval_config.num_samples),
      max_new_tokens=int(eval_config.max_new_tokens),
      length_penalty=float(eval_config.get("length_penalty", 1.0)),
      early_stopping=eval_config.get("early_stopping", False),
      stop_id=stop_id,
      pad_id=pad_id,
    )
  raise ValueError(f"evals.method must be 'sample' or 'beam', got {method!r}")


def generation_file_name(eval_config) -> str:
  """Official name of the generation JSON for these eval settings."""
  return official.file_name(
    eval_config.split,
    int(eval_config.num_samples),
    int(eval_config.top_k),
    float(eval_config.top_p),
    do_sample=eval_config.get("method", "sample") == "sample",
  )


def examples_by_record(src) -> dict[tuple[int, str, str], int]:
  """{(event_idx, relation, inference_text): index of its first example in `src`}.

  `src`: a "training"-expansion source of the split (one example per inference), in which the
  rank expansion's records (`rank.expand_records`) find their image, event and place.
  """
  first = {}
  for i in range(len(src)):
    ex = src[i]
    key = (
      int(ex["event_idx"]),
      io_util.as_str(ex["relation"]),
      io_util.as_str(ex["inference_text"]),
    )
    first.setdefault(key, i)
  return first


def _under(root, name) -> str:
  """`root/name` through epath (a gs:// root stays a URL)."""
  return os.fspath(io_util.epath(root) / name)


# Java's absence is said once per process: a TPU VM without a JRE evaluates every few thousand
# steps, and the same warning each time would only bury the training log.
_warned_no_java = False


def _warn_no_java(what: str) -> None:
  global _warned_no_java
  if not _warned_no_java:
    _warned_no_java = True
    print(
      f"[eval] commonsense: no `java` on PATH, {what} skipped during training (reported as NaN); "
      "score the generations file later with `python -m relations.evaluate commonsense`",
      file=sys.stderr,
      flush=True,
    )


def score_during_training(
  annots, gens, train, *, meteor, meteor_workers, gen_path, distinct_n=False
) -> dict:
  """`protocol.score_generations` that never fails for want of Java.

  Training machines (TPU VMs) often have no JRE. METEOR then is skipped and reported as NaN; if
  the PTB tokenisation itself needs the Stanford jar for these captions, every text metric is
  NaN (they all read the tokenised text). Either way one warning line per process, not a failed
  evaluation: the generations file is written, so `relations.evaluate` can score it elsewhere.

  Returns:
    The protocol's metrics dict (JSON-able: a skipped metric is None there, with its reason
    under "errors").
  """
  has_java = shutil.which("java") is not None
  try:
    metrics = protocol.score_generations(
      annots,
      gens,
      train,
      meteor=meteor and has_java,
      meteor_workers=meteor_workers,
      gens_name=gen_path,
      distinct_n=distinct_n,
    )
  except java_lib.JavaNotFoundError as e:
    _warn_no_java("METEOR and the text metrics (the PTB tokeniser needs the Stanford jar here)")
    metrics = {k: None for k in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "CIDEr")}
    metrics["errors"] = {"text_metrics": str(e)}
  if meteor and not has_java:
    _warn_no_java("METEOR")
    metrics["METEOR"] = None
    metrics.setdefault("errors", {})["METEOR"] = "no `java` on PATH during training"
  return metrics


def as_scalars(metrics: dict) -> dict[str, float]:
  """The numbers of a metrics dict as floats; a skipped metric (None) becomes NaN."""
  return {
    k: math.nan if v is None else float(v)
    for k, v in metrics.items()
    if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
  }


class Evaluator:
  """See the module docstring."""

  def __init__(self, model, config, eval_config, workdir):
    self.model = model
    self.config = config
    self.ec = eval_config
    self.workdir = workdir
    self.tok = task.tokenizer(config)
    self.layout = task.layout(config)
    self.decode_cfg = decode_config(eval_config, stop_id=self.tok.e_in_id, pad_id=self.tok.eos_id)
    decode_fn = decode.make_decode_fn(
      vl_generator.VLDecoder(model, self.layout.prompt_len), self.decode_cfg
    )
    seed = int(config.seed)

    def generate(params, batch):
      # One key per record (its index in the split): a record's samples do
      # not depend on its batch or on which process decodes it.
      keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(seed), batch["record_index"])
      return decode_fn(params, batch, keys)

    self._generate = eval_loop.jit_predict(generate)
    rel = self.layout.relation_pos

    def score(params, batch):
      return model.apply(
        {"params": params},
        batch,
        rel,
        batch["cand_ids"].shape[1],
        method=vl_generator.VLGenerator.continuation_scores,
      )

    self._score = eval_loop.jit_predict(score)

  # ---------------------------------------------------------------- generation
  def generation_source(self):
    # visual=vit: the JPEG (and its training-size copy), decoded by `task.encode` as in training.
    src = task.make_source(self.config, "generation", self.ec.split, image="jpeg")
    n = len(src)
    if int(self.ec.get("max_records", 0)):
      n = min(n, int(self.ec.max_records))
    return src, n

  def generate(self, params, mesh=None) -> list[tuple[int, dict]]:
    """This process's share of the official generation records, [(index, record)].

    `params` must be on the local devices (`eval_loop.localize`).
    """
    src, n = self.generation_source()
    raw = {}

    def load(i):
      ex = src[i]
      raw[i] = ex
      enc = task.encode(ex, self.config, with_labels=False, text_given=bool(self.ec.text_given))
      enc["record_index"] = np.int32(i)
      return enc

    def emit(i, toks):
      return official.record(raw.pop(i), np.asarray(toks).tolist(), self.tok)

    return eval_loop.predict_shard(
      n, load, lambda b: self._generate(params, b), int(self.ec.batch_size), emit, mesh=mesh
    )

  # ---------------------------------------------------------------- Acc@50
  def acc50_queries(self, annotations) -> list[dict]:
    """The candidate lists (released file, stored seeded draw, or a new one)."""
    path = self.ec.get("acc50_candidates") or ""
    if path:
      queries = rank.candidates_from_official(
        remote_inputs.local_copy(path), rank.expand_records(annotations)
      )
    else:
      seed = int(self.ec.get("acc50_seed", 0))
      path = os.path.join(self.workdir, f"{self.ec.split}_rank_random_50_seed{seed}.json")
      if io_util.exists(path):  # stored by an earlier run in this (maybe gs://) workdir
        queries = rank.load_candidates(remote_inputs.local_copy(path))
      else:
        queries = rank.build_candidates(annotations, 50, seed)
        if jax.process_index() == 0:
          io_util.makedirs(self.workdir)
          rank.save_candidates(path, queries, seed, 50)
    cap = int(self.ec.get("acc50_max_queries", 0))
    if cap:  # a quick estimate on the first `cap` queries (demo)
      queries = queries[:cap]
    return queries

  def acc50_scores(
    self, params, annotations, queries, mesh=None
  ) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
    """This process's share of candidate scores: [(query, (nll [C], n [C]))].

    Each query is one row: its prompt (image, event, place; positions
    before the relation token) runs once and its candidates continue it
    (`VLGenerator.continuation_scores`).
    """
    src = task.make_source(self.config, "training", self.ec.split, image="jpeg")
    records = rank.expand_records(annotations)
    first = examples_by_record(src)
    c_max = max(len(q["candidates"]) for q in queries)
    rel = self.layout.relation_pos
    full = self.layout.max_seq_len - rel

    continuations = {}

    def continuation(example, cand):
      """A candidate's ids, labels and mask from the relation token on.

      The image, event and place segments are each cut or padded to their own width
      (`sequence.combine_and_pad`), so these positions depend only on the candidate's relation and
      inference text, not on the query's prompt: each distinct candidate is encoded once, not once
      per query that draws it.
      """
      key = (cand["inference_relation"], cand["inference_text"])
      if key not in continuations:
        _, name = person_tags.map_numbers_to_det_tokens(cand["inference_text"])
        enc = task.encode(
          example,
          self.config,
          inference_name=name,
          relation=cand["inference_relation"],
          text_given=bool(self.ec.text_given),
        )
        lab = enc["labels"]
        # Only the inference span is scored, never the EP spans.
        lab[: rel + 1] = sequence.IGNORE
        continuations[key] = (enc["input_ids"][rel:], lab[rel:], enc["token_mask"][rel:])
      return continuations[key]

    def load(q):
      query = queries[q]
      ctx = records[query["query"]]
      key = (ctx["event_idx"], ctx["inference_relation"], ctx["inference_text"])
      if key not in first:
        raise ValueError(f"{self.ec.split}: no builder example for record {key}")
      example = src[first[key]]
      out = {
        k: v
        for k, v in task.encode(
          example, self.config, with_labels=False, text_given=bool(self.ec.text_given)
        ).items()
        if k != "labels"
      }  # the prompt: positions before the relation token are the same for every candidate
      ids = np.zeros((c_max, full), np.int32)
      labels = np.full((c_max, full), sequence.IGNORE, np.int32)
      mask = np.zeros((c_max, full), bool)
      for c, idx in enumerate(query["candidates"]):
        if not 0 <= idx < len(records):
          raise ValueError(
            f"query {q}: candidate index {idx} outside the {len(records)} expanded records"
          )
        ids[c], labels[c], mask[c] = continuation(example, records[idx])
      n = len(query["candidates"])
      ids[n:], labels[n:], mask[n:] = ids[0], labels[0], mask[0]
      # Positions after the last label are padding that no scored position
      # attends to (causal): cut them, to a width rounded up to 8 (one
      # compilation per width; the official layout's 23-token inference
      # segment scores 24 of the 50 positions after the prompt).
      last = int(np.max(np.nonzero(labels != sequence.IGNORE)[1]))
      width = min(full, -(-(last + 1) // 8) * 8)
      out.update(
        cand_ids=ids[:, :width],
        cand_labels=labels[:, :width],
        cand_mask=mask[:, :width],
        # Only these positions reach the vocabulary projection; their count, rounded, is the
        # bucket's second key (a few compiled shapes).
        cand_score_pos=vl_generator.continuation_score_positions(labels[:, :width], n),
      )
      return out

    def emit(q, res):
      n = len(queries[q]["candidates"])
      return np.asarray(res[0])[:n], np.asarray(res[1])[:n]

    return eval_loop.predict_shard(
      len(queries),
      load,
      lambda b: self._score(params, b),
      int(self.ec.get("acc50_batch_size", 4)),
      emit,
      bucket=lambda q, ex: (ex["cand_ids"].shape[1], ex["cand_score_pos"].shape[0]),
      mesh=mesh,
    )

  # ---------------------------------------------------------------- blind split
  def _finish_blind(self, items, annots, gen_path, outdir) -> dict[str, float]:
    """A split without references (test): write and validate the submission, score nothing."""

    def finalize(gathered):
      gens = [r for _, (_, _, r) in gathered]
      if not int(self.ec.get("max_records", 0)):  # a capped run cannot be a full submission
        official.validate_submission(gens, annots, int(self.ec.num_samples), name=gen_path)
      official.write(gen_path, gens)
      size = os.path.getsize(gen_path)
      print(
        f"{self.ec.split}: no references (blind split); wrote the leaderboard submission "
        f"{gen_path} ({len(gens)} records, {size} bytes); nothing scored",
        flush=True,
      )
      io_util.write_json_atomic(
        os.path.join(outdir, "metrics.json"),
        {"generations_file": gen_path, "num_records": len(gens), "scored": False},
      )
      return {"num_records": float(len(gens)), "submission_bytes": float(size)}

    return eval_loop.finish([((0, item[1]), item) for item in items], finalize)

  # ---------------------------------------------------------------- run
  def run(self, params, step) -> dict[str, float]:
    """Generates, writes the official JSON once, scores it (+ Acc@50).

    Sharded (`relations.train.eval_loop`): each process decodes and scores
    its share of the records / queries on its local devices; process 0
    gathers, writes `<split>_sample_...json` and `metrics.json` and scores;
    every process returns the same metrics.
    """
    outdir = os.path.join(self.workdir, f"step_{step}")
    gen_path = os.path.join(outdir, generation_file_name(self.ec))
    mesh = eval_loop.local_mesh()
    local = eval_loop.localize(params, mesh)
    root = self.config.data.manual_dir
    # A gs:// manual_dir (a pod's workers share no disk) is read through local copies.
    annots = records_lib.load_annotations(
      remote_inputs.local_copy(_under(root, f"{self.ec.split}_annots.json"))
    )
    items = [("gen", i, r) for i, r in self.generate(local, mesh)]
    if official.is_blind(annots):
      return self._finish_blind(items, annots, gen_path, outdir)
    queries = []
    if self.ec.get("acc50", True):
      queries = self.acc50_queries(annots)
      items += [("acc50", q, s) for q, s in self.acc50_scores(local, annots, queries, mesh)]

    def finalize(gathered):
      gens = [r for _, (kind, _, r) in gathered if kind == "gen"]
      scores = [s for _, (kind, _, s) in gathered if kind == "acc50"]
      official.write(gen_path, gens)
      train_path = _under(root, "train_annots.json")
      train = (
        records_lib.load_annotations(remote_inputs.local_copy(train_path))
        if io_util.exists(train_path)
        else None
      )
      workers = int(self.ec.get("meteor_workers", 0)) or None
      metrics = score_during_training(
        annots,
        gens,
        train,
        meteor=bool(self.ec.meteor),
        meteor_workers=workers,
        gen_path=gen_path,
        distinct_n=bool(self.ec.get("distinct_n", False)),
      )
      if queries:
        nll, ntok = [s[0] for s in scores], [s[1] for s in scores]
        metrics.update(rank.accuracy_from_scores(queries, nll, ntok))
        # The ranking in the official run_rank.py layout, which `relations.evaluate commonsense
        # --acc50 --candidates FILE` re-scores without the model.
        rank_path = os.path.join(outdir, f"{self.ec.split}_rank_random_50.json")
        rank.write_official_results(rank_path, annots, queries, nll, ntok)
        metrics["rank_file"] = rank_path
      metrics["generations_file"] = gen_path
      io_util.write_json_atomic(os.path.join(outdir, "metrics.json"), metrics)
      sample = [
        (f"{g.get('event', '')} [{g['inference_relation']}]", g["generations"]) for g in gens
      ]
      return {
        **as_scalars(metrics),
        summaries.MEDIA: {"texts": {"generations": summaries.generations_markdown(sample)}},
      }

    # Gathered in one collective; sort keys keep generations before scores,
    # each in index order.
    keyed = [((0 if kind == "gen" else 1, i), (kind, i, v)) for kind, i, v in items]
    return eval_loop.finish(keyed, finalize, shard_dir=eval_loop.shard_dir(self.workdir))
