"""Event and place generation from the image (paper Table 6, Task 2's first half).

A `target=event_place` config (`configs/commonsense.py:...,target=event_place`) trains the same
generator with only the event and place spans as targets. Generation, per event of a split:

1. the prompt is the image segment and `<|b_ev|>` (positions 0..event_start); the event is
   decoded until `<|e_ev|>` (at most max_event - 2 tokens);
2. the generated event, person tags mapped to `<|detN|>`, fills the event segment, and the prompt
   continues to `<|b_pl|>` (positions 0..place_start); the place is decoded until `<|e_pl|>`.

Metrics (Table 6: C, B-4, M, R, Vocab, Sent Len), per field: each generated event is scored
against every ground-truth event of the same image (its references), each place against the
image's places; PTB tokenisation, CIDEr-D, BLEU-4, METEOR (optional), ROUGE-L, and the
vocabulary size and mean length of the generations (plus the references', the GT row).

Known deviation: the visual slots are the builder example's (`dets`: the detections the
ground-truth event mentions, or all people), as in training; a strict image-only setting would
use all person detections.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from relations import io_util
from relations.commonsense import model as vl_generator
from relations.commonsense import task
from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.generation import decode
from relations.commonsense.metrics import bleu as bleu_lib
from relations.commonsense.metrics import cider as cider_lib
from relations.commonsense.metrics import meteor as meteor_lib
from relations.commonsense.metrics import ptb, rouge
from relations.commonsense.text import person_tags

FILE_NAME = "{split}_event_place.json"


def first_example_per_event(src) -> list[int]:
  """Indices (into a `generation` source) of the first example of each event, in event order."""
  seen, out = set(), []
  for i in range(len(src)):
    e = int(src[i]["event_idx"])
    if e not in seen:
      seen.add(e)
      out.append(i)
  return out


class EventPlaceGenerator:
  """Two-stage decoding of an event and a place per example (see the module docstring)."""

  def __init__(self, model, config, top_p: float = 0.9, seed: int = 0):
    self.model, self.config, self.seed = model, config, seed
    self.tok = task.tokenizer(config)
    self.layout = lay = task.layout(config)

    def fn(prompt_len, stop_id, max_new):
      cfg = decode.SampleConfig(
        num_samples=1,
        max_new_tokens=max_new,
        top_p=top_p,
        top_k=0,
        temperature=1.0,
        stop_id=stop_id,
        pad_id=self.tok.eos_id,
      )
      return decode.make_decode_fn(vl_generator.VLDecoder(model, prompt_len), cfg)

    self._event = fn(lay.event_start + 1, self.tok.e_ev_id, lay.max_event - 2)
    self._place = fn(lay.place_start + 1, self.tok.e_pl_id, lay.max_place - 2)

  def _text(self, row, stop_id) -> str:
    ids = [int(i) for i in row]
    if stop_id in ids:
      ids = ids[: ids.index(stop_id)]
    # Tags become bare numbers, as in the annotations ("<|det1|> sits" -> "1 sits").
    return person_tags.replace_names(self.tok.decode(ids, skip_special_tokens=True), {}).strip()

  def _run(self, fn, params, batch, indices, stop_id):
    keys = jax.vmap(jax.random.fold_in, (None, 0))(
      jax.random.key(self.seed), np.asarray(indices, np.int32)
    )
    toks = np.asarray(fn(params, batch, keys))  # [B, 1, T]
    return [self._text(r[0], stop_id) for r in toks]

  def generate(self, params, examples, indices, batch_size: int = 32) -> list[tuple[str, str]]:
    """[(event, place)] for builder `examples` (record `indices` seed each one's samples)."""
    out = []
    for start in range(0, len(examples), batch_size):
      chunk = examples[start : start + batch_size]
      idx = list(indices[start : start + batch_size])
      pad = batch_size - len(chunk)
      # A fixed batch shape (one compilation): pad with copies of the first example.
      rows = list(chunk) + [chunk[0]] * pad
      idx += [idx[0]] * pad

      def stack(exs):
        enc = [task.encode(ex, self.config, with_labels=False) for ex in exs]
        return {k: np.stack([e[k] for e in enc]) for k in enc[0]}

      events = self._run(self._event, params, stack(rows), idx, self.tok.e_ev_id)
      with_event = []
      for ex, ev in zip(rows, events):
        _, name = person_tags.map_numbers_to_det_tokens(ev)
        with_event.append(dict(ex, event_name=name))
      places = self._run(self._place, params, stack(with_event), idx, self.tok.e_pl_id)
      out += list(zip(events, places))[: len(chunk)]
    return out


def score(generated: list[dict], annotations: list[dict], meteor: bool = True) -> dict:
  """Table 6 metrics of generated events and places.

  Args:
    generated: [{"event_idx", "event", "place"}], one per event.
    annotations: the split's annotation records (references: every event / place of the
      record's image).
    meteor: compute METEOR (Java).

  Returns:
    {"event": {...}, "place": {...}} with CIDEr, Bleu_4, METEOR, ROUGE_L, Vocab, Sent_Len,
    GT_Vocab, GT_Sent_Len, num (fractions as pycocoevalcap returns them).
  """
  by_image = {}
  for rec in annotations:
    by_image.setdefault(rec["img_fn"], []).append(rec)
  out = {}
  for field in ("event", "place"):
    hyps = [g[field] for g in generated]
    refs = [[r[field] for r in by_image[annotations[g["event_idx"]]["img_fn"]]] for g in generated]
    flat = [r for rs in refs for r in rs]
    tok_hyps, tok_flat = ptb.tokenize_many([hyps, flat])
    tok_refs, pos = [], 0
    for rs in refs:
      tok_refs.append(tuple(tok_flat[pos : pos + len(rs)]))
      pos += len(rs)
    m = {
      "CIDEr": float(cider_lib.corpus_cider(tok_hyps, tok_refs)[0]),
      "Bleu_4": float(bleu_lib.corpus_bleu(tok_hyps, tok_refs)[3]),
      "ROUGE_L": float(rouge.corpus_rouge_l(tok_hyps, tok_refs)[0]),
    }
    if meteor:
      run = meteor_lib.CorpusMeteor(tok_hyps, tok_refs)
      try:
        m["METEOR"] = float(run.result())
      finally:
        run.close()
    m.update(rouge.vocab_stats(tok_hyps))
    gt = rouge.vocab_stats(ptb.tokenize([r[field] for r in annotations]))
    m["GT_Vocab"], m["GT_Sent_Len"] = gt["Vocab"], gt["Sent_Len"]
    m["num"] = len(hyps)
    out[field] = m
  return out


def generate_split(model, params, config, split: str, *, top_p=0.9, batch_size=32, max_records=0):
  """[{"event_idx", "img_fn", "event", "place"}] generated for every event of `split`."""
  src = task.make_source(config, "generation", split, image="jpeg")
  first = first_example_per_event(src)
  if max_records:
    first = first[:max_records]
  examples = [src[i] for i in first]
  gen = EventPlaceGenerator(model, config, top_p=top_p, seed=int(config.seed))
  pairs = gen.generate(params, examples, first, batch_size=batch_size)
  return [
    {
      "event_idx": int(ex["event_idx"]),
      "img_fn": io_util.as_str(ex["img_fn"]),
      "event": ev,
      "place": pl,
    }
    for ex, (ev, pl) in zip(examples, pairs)
  ]


class Evaluator:
  """`type="relations.commonsense.event_place"`: generate events/places of a split, score them.

  Writes `<workdir>/step_<N>/<split>_event_place.json` and `metrics.json`; returns
  `event/<metric>` and `place/<metric>` floats. Single process (gathering is left to
  `relations.commonsense.pipeline`, which runs it once).
  """

  def __init__(self, model, config, eval_config, workdir):
    self.model, self.config, self.ec, self.workdir = model, config, eval_config, workdir

  def run(self, params, step) -> dict[str, float]:
    params = jax.device_get(params)
    gens = generate_split(
      self.model,
      params,
      self.config,
      self.ec.split,
      top_p=float(self.ec.top_p),
      batch_size=int(self.ec.batch_size),
      max_records=int(self.ec.get("max_records", 0)),
    )
    root = self.config.data.manual_dir
    annots = records_lib.load_annotations(os.path.join(root, f"{self.ec.split}_annots.json"))
    metrics = score(gens, annots, meteor=bool(self.ec.get("meteor", True)))
    outdir = os.path.join(self.workdir, f"step_{step}")
    if jax.process_index() == 0:
      io_util.write_json_atomic(os.path.join(outdir, FILE_NAME.format(split=self.ec.split)), gens)
      io_util.write_json_atomic(os.path.join(outdir, "metrics.json"), metrics)
    return {f"{f}/{k}": float(v) for f, m in metrics.items() for k, v in m.items()}
