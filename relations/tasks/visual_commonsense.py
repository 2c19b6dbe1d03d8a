# Copyright 2025 The relations Authors.
# SPDX-License-Identifier: Apache-2.0
"""Task glue: visual commonsense generation (VisualCOMET) <-> the trainer.

Data: the TFDS `visualcomet` builder (`training[_features]` for training,
`generation[_features]` for decoding, the `training` val split for Acc@50,
whose order is the official rank expansion). Every example becomes the
official fixed-width layout (`relations.text.sequence`) plus its visual slots
(`vl_generator` docstring). Which inputs the model sees is the ablation of the
paper's Table 2: `config.inputs.{image,event,place}` (a dropped text segment
becomes eos padding, as `--no_text` does), `config.model.person_grounding`,
`config.loss.mode` ("all" = EP loss); `config.evals.*.text_given=False`
withholds event and place at test time only.

`run_demo(workdir)`: synthetic data in the official layout -> TFDS -> tiny
model trained by the shared trainer -> 5 nucleus samples per (event,
relation) -> official generation JSON -> exact metrics (+ Acc@50) -> an HTML
report with the generations next to their images.
"""

from __future__ import annotations

import functools
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image

from relations.models import vl_generator
from relations.text import sequence
from relations.text import tokenizer as tokenizer_lib

FEATURE_DIM = 2048


def _s(x) -> str:
  return x.decode("utf-8") if isinstance(x, bytes) else str(x)


# ---------------------------------------------------------------- text setup
@functools.lru_cache(maxsize=8)
def _tokenizer(path: str) -> tokenizer_lib.VisualCometTokenizer:
  return tokenizer_lib.VisualCometTokenizer.from_dir(path)


def tokenizer(config) -> tokenizer_lib.VisualCometTokenizer:
  """The tokenizer of `config.data.tokenizer_dir` (default manual_dir/tokenizer)."""
  path = config.data.get("tokenizer_dir") or os.path.join(
      config.data.manual_dir, "tokenizer")
  return _tokenizer(os.path.abspath(path))


def layout(config) -> sequence.Layout:
  return sequence.Layout(**dict(config.layout))


# ---------------------------------------------------------------- data
def make_builder(config, expansion: str):
  """Builds if needed and returns the `visualcomet` builder for `expansion`."""
  from relations.datasets import tfds_util  # pylint: disable=g-import-not-at-top
  from relations.datasets.visualcomet import visualcomet_dataset_builder as vb  # pylint: disable=g-import-not-at-top
  name = expansion + ("_features" if config.model.visual == "features" else "")
  return tfds_util.ensure_built(vb.Builder, config.data.data_dir,
                                config.data.manual_dir or None, config=name)


def make_train_source(config):
  return make_builder(config, "training").as_data_source(
      config.data.get("train_split", "train"))


def _mask_segments(ids, labels, lay, eos, event: bool, place: bool):
  """Drops the event and/or place segment (eos ids, no labels)."""
  for keep, lo, hi in ((event, lay.event_start, lay.place_start),
                       (place, lay.place_start, lay.relation_pos)):
    if not keep:
      ids[lo:hi] = eos
      labels[lo:hi] = sequence.IGNORE


def encode(example, config, *, inference_name: str | None = None,
           relation: str | None = None, text_given: bool = True,
           with_labels: bool = True) -> dict[str, np.ndarray]:
  """One builder example -> the model's fixed-shape numpy inputs.

  Args:
    example: a `visualcomet` builder example (bytes or str fields).
    config: the run config.
    inference_name: tag-mapped inference text to label (default: the
      example's `inference_text_name`); ignored without labels.
    relation: relation token (default: the example's).
    text_given: False withholds event and place (test-time ablation).
    with_labels: False encodes a generation prompt (no inference).

  Returns:
    input_ids, labels, token_mask [L]; slot_mask, slot_person_ids [K]; and
    visual_features [K, 2048] or image [S, S, 3] + boxes [K, 4] by
    `config.model.visual` (see `vl_generator`).
  """
  tok = tokenizer(config)
  lay = layout(config)
  inp = config.inputs
  rel = relation or _s(example["relation"])
  inf = None
  if with_labels:
    inf = inference_name if inference_name is not None else _s(
        example["inference_text_name"])
  enc = sequence.encode(tok, _s(example["event_name"]), _s(example["place"]),
                        rel, inf, layout=lay, mode=config.loss.mode)
  ids, labels = np.array(enc["input_ids"]), np.array(enc["labels"])
  _mask_segments(ids, labels, lay, tok.eos_id, inp.event and text_given,
                 inp.place and text_given)
  out = {"input_ids": ids.astype(np.int32), "labels": labels.astype(np.int32),
         "token_mask": ids != tok.eos_id}
  out.update(_visual(example, config, tok, lay))
  return out


def _visual(example, config, tok, lay) -> dict[str, np.ndarray]:
  k = lay.num_max_boxes
  names = [_s(n) for n in example["names"]]
  dets = np.asarray(example["dets"], np.int64).reshape(-1)
  kept = sequence.slot_dets(dets, k)
  n = 1 + len(kept)
  slot_mask = np.zeros(k, bool)
  slot_mask[:n] = bool(config.inputs.image)
  out = {"slot_mask": slot_mask,
         "slot_person_ids": sequence.slot_person_ids(tok, names, dets, k)}
  visual = config.model.visual
  if visual == "features":
    feats = np.zeros((k, FEATURE_DIM), np.float32)
    given = np.asarray(example["visual_features"], np.float32)
    feats[:n] = given[:n]
    out["visual_features"] = feats
  elif visual == "vit":
    size = int(config.data.image_size)
    img = Image.fromarray(np.asarray(example["image"], np.uint8))
    img = img.resize((size, size), Image.BILINEAR)
    out["image"] = np.asarray(img, np.float32) / 127.5 - 1.0
    w, h = float(example["width"]), float(example["height"])
    boxes = np.zeros((k, 4), np.float32)
    boxes[0] = (0.0, 0.0, 1.0, 1.0)
    if len(kept):
      raw = np.asarray(example["boxes"], np.float32).reshape(-1, 4)[kept]
      boxes[1:n] = np.clip(raw / np.array([w, h, w, h], np.float32), 0, 1)
    out["boxes"] = boxes
  return out


def preprocess_train(example, rng, config):
  del rng  # the layout is deterministic; dropout comes from the step rng.
  return encode(example, config)


# ---------------------------------------------------------------- model
def make_model(config) -> vl_generator.VLGenerator:
  m = config.model
  lm = dict(m.lm)
  if not lm.get("vocab_size"):
    lm["vocab_size"] = tokenizer(config).vocab_size
  return vl_generator.Model(
      lm_variant=m.lm_variant or None, lm=lm,
      visual=m.visual if config.inputs.image else "none",
      vit=dict(m.vit) if m.get("vit") else None,
      roi_samples=m.roi_samples, num_slots=config.layout.num_max_boxes,
      person_grounding=m.person_grounding, subject_ids=m.subject_ids,
      attention_mask=m.attention_mask, visual_dropout=m.visual_dropout,
      slot_scale_init=m.get("slot_scale_init", 1.0))


def init_params(model, batch, rng):
  batch = jax.tree.map(jnp.asarray, batch)
  params = model.init({"params": rng, "dropout": rng}, batch,
                      train=False)["params"]
  return nn.meta.unbox(params)


def load_pretrained(config, params):
  """Replaces the GPT-2 weights with `config.model.init_from` (HF safetensors).

  Call after `init_params`; a no-op when init_from is empty.
  """
  path = config.model.get("init_from")
  if not path:
    return params
  from relations.models import gpt2_import  # pylint: disable=g-import-not-at-top
  return gpt2_import.load(params, path, prefix=("lm",))


def loss_fn(model, params, batch, rng, config):
  del config
  logits, _ = model.apply({"params": params}, batch, train=True,
                          rngs={"dropout": rng})
  return vl_generator.lm_loss(logits, batch["labels"])


# ---------------------------------------------------------------- demo
_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                       "vl_generator.py")
MODALITIES = {  # name -> config arg (the must-show rows of Table 2)
    "Event+Place": "variant=tiny,inputs=event_place,pg=false",
    "Image+PG": "variant=tiny,inputs=image,pg=true",
    "Image+Event+Place+PG": "variant=tiny,inputs=image_event_place,pg=true",
}
HEADLINE = ("Bleu_2", "METEOR", "CIDEr", "Acc@50", "Unique", "Novel")


def demo_config(root: str, arg: str = "variant=tiny", **eval_overrides):
  """The tiny config pointed at `root`/data (synthetic) and `root`/tfds."""
  from relations.train import config_util  # pylint: disable=g-import-not-at-top
  config = config_util.load_config(os.path.abspath(_CONFIG) + ":" + arg)
  with config.unlocked():
    config.data.manual_dir = os.path.join(root, "data")
    config.data.data_dir = os.path.join(root, "tfds")
    config.evals.val.update(eval_overrides)
  return config


def make_data(root: str, seed: int = 0) -> None:
  """Synthetic corpus in the official layout + the two TFDS configs we read."""
  from relations.datasets import synthetic_commonsense  # pylint: disable=g-import-not-at-top
  data = os.path.join(root, "data")
  if not os.path.exists(os.path.join(data, "val_annots.json")):
    synthetic_commonsense.generate(data, seed=seed, verbose=False,
                                   overwrite=True)
  config = demo_config(root)
  make_builder(config, "training")
  make_builder(config, "generation")


def train_and_evaluate(root: str, arg: str, name: str, steps: int = 0,
                       **eval_overrides):
  """Trains one config with the shared trainer; returns its val metrics."""
  from relations.train import trainer  # pylint: disable=g-import-not-at-top
  config = demo_config(root, arg, **eval_overrides)
  if steps:
    with config.unlocked():
      config.total_steps = config.checkpoint_every = steps
  result = trainer.train(config, os.path.join(root, name))
  metrics = {k.split("/", 1)[1]: v for k, v in result.eval_metrics.items()
             if k.startswith("val/")}
  metrics["steps_per_sec"] = result.steps_per_sec
  gens = os.path.join(root, name, "eval", "val", f"step_{result.step}")
  return metrics, gens


def write_report(root: str, gens_dir: str, out_dir: str,
                 num_events: int = 6) -> str:
  """HTML page + PNGs: each image (person boxes tagged) next to its samples.

  Returns:
    The path of `report.html`.
  """
  import base64  # pylint: disable=g-import-not-at-top
  import html  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from PIL import ImageDraw  # pylint: disable=g-import-not-at-top
  from relations.datasets.visualcomet import records as records_lib  # pylint: disable=g-import-not-at-top
  data = os.path.join(root, "data")
  gen_file = [f for f in os.listdir(gens_dir) if f.endswith("top_p_0.9.json")]
  with open(os.path.join(gens_dir, gen_file[0])) as f:
    gens = json.load(f)
  annots = records_lib.load_annotations(os.path.join(data, "val_annots.json"))
  by_event = {}
  for g in gens:
    by_event.setdefault(g["event_idx"], []).append(g)
  os.makedirs(out_dir, exist_ok=True)
  rows = []
  for e in sorted(by_event)[:num_events]:
    rec = annots[e]
    img = Image.open(os.path.join(data, "vcr1images", rec["img_fn"]))
    img = img.convert("RGB").resize((256, 256))
    meta = records_lib.load_metadata(
        os.path.join(data, "vcr1images", rec["metadata_fn"]))
    sx, sy = 256 / meta["width"], 256 / meta["height"]
    draw = ImageDraw.Draw(img)
    for i, (name, box) in enumerate(zip(meta["names"], meta["boxes"])):
      x1, y1, x2, y2 = (float(v) for v in box[:4])
      colour = (255, 255, 255) if name == "person" else (128, 128, 128)
      draw.rectangle([x1 * sx, y1 * sy, x2 * sx, y2 * sy], outline=colour)
      draw.text((x1 * sx + 2, y1 * sy + 1), str(i + 1), fill=colour)
    png = os.path.join(out_dir, f"event_{e:04d}.png")
    img.save(png)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    src = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    cells = []
    for g in by_event[e]:
      rel = g["inference_relation"]
      samples = "".join(f"<li>{html.escape(t)}</li>" for t in g["generations"])
      refs = "; ".join(html.escape(t) for t in rec.get(rel, [])) or "(none)"
      cells.append(f"<td><b>{rel}</b><ol>{samples}</ol>"
                   f"<small>references: {refs}</small></td>")
    rows.append(
        f"<tr><td><img src='{src}' width=256><br>"
        f"<b>event</b> {html.escape(rec['event'])}<br>"
        f"<b>place</b> {html.escape(rec['place'])}</td>{''.join(cells)}</tr>")
  page = ("<html><head><meta charset='utf-8'><title>VisualCOMET demo"
          "</title></head><body><h2>Generations (5 nucleus samples, p=0.9) "
          "next to their images; box labels are the person tags</h2>"
          f"<p>{html.escape(gen_file[0])}</p><table border=1 "
          "cellpadding=4>" + "".join(rows) + "</table></body></html>")
  path = os.path.join(out_dir, "report.html")
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.write(page)
  os.replace(path + ".tmp", path)
  return path


def run_demo(workdir: str) -> dict:
  """Synthetic data -> TFDS -> tiny Image+Event+Place+PG -> metrics + report.

  Acc@50 is estimated on the first 60 queries to fit the demo's time; run
  `python -m relations.tasks.visual_commonsense --modalities DIR` for full
  validation numbers of the three modalities.
  """
  import time  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  root = os.path.abspath(workdir)
  make_data(root)
  t_data = time.perf_counter() - t0
  metrics, gens = train_and_evaluate(
      root, MODALITIES["Image+Event+Place+PG"], "image_event_place_pg",
      acc50_max_queries=60)
  report = write_report(root, gens, os.path.join(root, "report"))
  out = {"Image+Event+Place+PG": {k: metrics.get(k) for k in HEADLINE},
         "Acc@50_queries": 60,
         "generations": gens, "report": report,
         "seconds": {"data": t_data, "total": time.perf_counter() - t0},
         "steps_per_sec": metrics["steps_per_sec"]}
  with open(os.path.join(root, "demo_metrics.json"), "w") as f:
    json.dump(out, f, indent=2)
  return out


def run_modalities(workdir: str, steps: int = 0) -> dict:
  """Trains the three must-show modalities; full val metrics for each.

  Args:
    workdir: data, runs and `modalities.json` go here.
    steps: training steps (0 = the tiny config's).
  """
  import json  # pylint: disable=g-import-not-at-top
  root = os.path.abspath(workdir)
  make_data(root)
  table = {}
  for name, arg in MODALITIES.items():
    metrics, gens = train_and_evaluate(root, arg, name.replace("+", "_"),
                                       steps=steps)
    table[name] = {k: metrics.get(k) for k in HEADLINE}
    table[name]["generations"] = gens
  print(f"{'modality':<24}" + "".join(f"{k:>9}" for k in HEADLINE))
  for name, m in table.items():
    print(f"{name:<24}" + "".join(
        f"{100 * m[k]:9.2f}" if m[k] is not None else f"{'n/a':>9}"
        for k in HEADLINE))
  with open(os.path.join(root, "modalities.json"), "w") as f:
    json.dump(table, f, indent=2)
  return table


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top
  if len(sys.argv) in (3, 4) and sys.argv[1] == "--modalities":
    run_modalities(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 0)
  elif len(sys.argv) == 3 and sys.argv[1] == "--demo":
    print(run_demo(sys.argv[2]))
  else:
    raise SystemExit("usage: python -m relations.tasks.visual_commonsense "
                     "(--demo WORKDIR | --modalities WORKDIR [STEPS])")
