"""Task glue: visual commonsense generation (VisualCOMET) <-> the trainer.

Data: the TFDS `visualcomet` builder (`training[_features]` for training,
`generation[_features]` for decoding, the `training` val split for Acc@50,
whose order is the official rank expansion). Every example becomes the
official fixed-width layout (`relations.commonsense.text.sequence`) plus its visual slots
(`vl_generator` docstring). Which inputs the model sees is the ablation of the
paper's Table 2: `config.inputs.{image,event,place}` (a dropped text segment
becomes eos padding, as `--no_text` does), `config.model.person_grounding`,
`config.loss.mode` ("all" = EP loss); `config.evals.*.text_given=False`
withholds event and place at test time only.

`demo.run_demo(workdir)`: synthetic data in the official layout -> TFDS -> tiny
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

from relations import io_util
from relations.commonsense import losses
from relations.commonsense import model as vl_generator
from relations.commonsense.text import sequence
from relations.commonsense.text import tokenizer as tokenizer_lib
from relations.train import precision

FEATURE_DIM = 2048


# ---------------------------------------------------------------- text setup
@functools.lru_cache(maxsize=8)
def _tokenizer(path: str) -> tokenizer_lib.VisualCometTokenizer:
  return tokenizer_lib.VisualCometTokenizer.from_dir(path)


def tokenizer(config) -> tokenizer_lib.VisualCometTokenizer:
  """The tokenizer of `config.data.tokenizer_dir` (default manual_dir/tokenizer)."""
  from relations import io_util, remote_inputs  # pylint: disable=g-import-not-at-top

  path = config.data.get("tokenizer_dir") or os.fspath(
    io_util.epath(config.data.manual_dir) / "tokenizer"
  )
  # The GPT-2 vocabulary files of a gs:// manual_dir are read from a local copy of the folder.
  return _tokenizer(os.path.abspath(remote_inputs.local_copy(path)))


def layout(config) -> sequence.Layout:
  return sequence.Layout(**dict(config.layout))


# ---------------------------------------------------------------- data
def _builders(config, expansion: str):
  """(expansion builder, image-table builder), each built if needed."""
  from relations import tfds_util  # pylint: disable=g-import-not-at-top
  from relations.commonsense.data.visualcomet import visualcomet_dataset_builder as vb  # pylint: disable=g-import-not-at-top

  name = expansion + ("_features" if config.model.visual == "features" else "")
  built = [
    tfds_util.ensure_built(
      vb.Builder, config.data.data_dir, config.data.manual_dir or None, config=n
    )
    for n in (name, vb.table_config(name))
  ]
  return built[0], built[1]


def make_builder(config, expansion: str):
  """Builds if needed and returns the `visualcomet` builder for `expansion`.

  Its examples refer to the image table (built too); read them joined with
  `make_source`.
  """
  return _builders(config, expansion)[0]


def make_source(config, expansion: str, split: str, image: str = "decoded"):
  """Random-access examples of `expansion`/`split`, joined with their image table.

  `visual=features` configs read the features stored once per image and never
  touch a JPEG; `visual=vit` gets the image decoded, or with `image="jpeg"`
  still encoded, with the table's training-size copy `image_small` (`encode`
  then decodes the copy when it is large enough for `data.image_size`, else
  the original; training and the evaluator read this way).
  """
  from relations.commonsense.data.visualcomet import visualcomet_dataset_builder as vb  # pylint: disable=g-import-not-at-top

  return vb.DataSource(*_builders(config, expansion), split, image=image)


def make_train_source(config):
  return make_source(config, "training", config.data.get("train_split", "train"), image="jpeg")


def decode_image(data: bytes, size: int) -> np.ndarray:
  """JPEG bytes -> uint8 RGB image, decoded at the smallest 1/1, 1/2, 1/4 or 1/8 scale
  whose short side is still >= `size` (libjpeg's DCT scaling: a 640-px image for a
  224-px ViT decodes at 320 px, ~3x faster than in full)."""
  import cv2  # pylint: disable=g-import-not-at-top

  hw = _jpeg_size(data)
  flag = cv2.IMREAD_COLOR
  for reduced, factor in (
    (cv2.IMREAD_REDUCED_COLOR_8, 8),
    (cv2.IMREAD_REDUCED_COLOR_4, 4),
    (cv2.IMREAD_REDUCED_COLOR_2, 2),
  ):
    if hw is not None and min(hw) // factor >= size:
      flag = reduced
      break
  img = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
  if img is None:
    raise ValueError("stored image is not a decodable JPEG")
  return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _jpeg_size(data: bytes):
  """(height, width) from a JPEG's SOF marker, or None."""
  i, n = 2, len(data)
  while i + 9 < n:
    if data[i] != 0xFF:
      return None
    marker = data[i + 1]
    length = int.from_bytes(data[i + 2 : i + 4], "big")
    if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
      return (
        int.from_bytes(data[i + 5 : i + 7], "big"),
        int.from_bytes(data[i + 7 : i + 9], "big"),
      )
    i += 2 + length
  return None


def _mask_segments(ids, labels, lay, eos, event: bool, place: bool):
  """Drops the event and/or place segment (eos ids, no labels)."""
  for keep, lo, hi in (
    (event, lay.event_start, lay.place_start),
    (place, lay.place_start, lay.relation_pos),
  ):
    if not keep:
      ids[lo:hi] = eos
      labels[lo:hi] = sequence.IGNORE


def encode(
  example,
  config,
  *,
  inference_name: str | None = None,
  relation: str | None = None,
  text_given: bool = True,
  with_labels: bool = True,
) -> dict[str, np.ndarray]:
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
    visual_features [K, 2048] or image uint8 [S, S, 3] + boxes [K, 4] by
    `config.model.visual` (see `vl_generator`).
  """
  tok = tokenizer(config)
  lay = layout(config)
  inp = config.inputs
  rel = relation or io_util.as_str(example["relation"])
  inf = None
  if with_labels:
    inf = (
      inference_name
      if inference_name is not None
      else io_util.as_str(example["inference_text_name"])
    )
  enc = sequence.encode(
    tok,
    io_util.as_str(example["event_name"]),
    io_util.as_str(example["place"]),
    rel,
    inf,
    layout=lay,
    mode=config.loss.mode,
  )
  ids, labels = np.array(enc["input_ids"]), np.array(enc["labels"])
  if config.loss.get("target", "inference") == "event_place":
    # Table 6's "Image -> Event + Place": only the event and place spans are targets.
    labels[lay.relation_pos :] = sequence.IGNORE
  _mask_segments(ids, labels, lay, tok.eos_id, inp.event and text_given, inp.place and text_given)
  out = {
    "input_ids": ids.astype(np.int32),
    "labels": labels.astype(np.int32),
    "token_mask": ids != tok.eos_id,
  }
  out.update(_visual(example, config, tok, lay))
  return out


def _visual(example, config, tok, lay) -> dict[str, np.ndarray]:
  k = lay.num_max_boxes
  names = [io_util.as_str(n) for n in example["names"]]
  dets = np.asarray(example["dets"], np.int64).reshape(-1)
  kept = sequence.slot_dets(dets, k)
  n = 1 + len(kept)
  slot_mask = np.zeros(k, bool)
  slot_mask[:n] = bool(config.inputs.image)
  out = {"slot_mask": slot_mask, "slot_person_ids": sequence.slot_person_ids(tok, names, dets, k)}
  visual = config.model.visual
  if visual == "features":
    feats = np.zeros((k, FEATURE_DIM), np.float32)
    given = np.asarray(example["visual_features"], np.float32)
    feats[:n] = given[:n]
    out["visual_features"] = feats
  elif visual == "vit":
    size = int(config.data.image_size)
    img = example["image"]
    if isinstance(img, bytes):  # training source: decoded here, at the size needed
      small = example.get("image_small")
      hw = _jpeg_size(small) if small is not None else None
      # The table's training-size copy when it is large enough (~10x fewer bytes to decode).
      img = decode_image(small if hw is not None and min(hw) >= size else img, size)
    img = Image.fromarray(np.asarray(img, np.uint8))
    img = img.resize((size, size), Image.BILINEAR)
    out["image"] = np.asarray(img, np.uint8)  # normalised on device (model)
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
  dtype, remat = precision.compute_dtype(config), precision.remat(config)
  lm = {"dtype": dtype, "remat": remat, **lm}
  return vl_generator.Model(
    lm_variant=m.lm_variant or None,
    lm=lm,
    visual=m.visual if config.inputs.image else "none",
    vit={"dtype": dtype, "remat": remat, **dict(m.vit)} if m.get("vit") else None,
    roi_samples=m.roi_samples,
    num_slots=config.layout.num_max_boxes,
    person_grounding=m.person_grounding,
    subject_ids=m.subject_ids,
    attention_mask=m.attention_mask,
    visual_dropout=m.visual_dropout,
    slot_scale_init=m.get("slot_scale_init", 1.0),
  )


def init_params(model, batch, rng):
  batch = jax.tree.map(jnp.asarray, batch)
  params = model.init({"params": rng, "dropout": rng}, batch, train=False)["params"]
  return nn.meta.unbox(params)


def load_pretrained(config, params):
  """Replaces the GPT-2 weights with `config.model.init_from` (HF safetensors).

  Call after `init_params`; a no-op when init_from is empty.
  """
  path = config.model.get("init_from")
  if not path:
    return params
  from relations import remote_inputs  # pylint: disable=g-import-not-at-top
  from relations.commonsense import gpt2_import  # pylint: disable=g-import-not-at-top

  # A gs:// file is read from a local copy, with the config.json that gives num_heads.
  path = remote_inputs.local_copy(path, siblings=("config.json",))
  return gpt2_import.load(params, path, prefix=("lm",))


def loss_fn(model, params, batch, rng, config):
  del config
  logits, _ = model.apply({"params": params}, batch, train=True, rngs={"dropout": rng})
  return losses.lm_loss(logits, batch["labels"])
