"""VisualCOMET generator: GPT-2 whose image positions hold visual slots.

Usage:
  model = vl_generator.Model(lm_variant="small", visual="features")
  logits, out = model.apply({"params": p}, batch)        # [B, L, V]
  loss, metrics = losses.lm_loss(logits, batch["labels"])   # relations.commonsense.losses

Batch (one example per row; shapes without the batch dim; K = num_slots):
  input_ids        int32 [L]  the official fixed-width layout
                              (`relations.commonsense.text.sequence`); visual slots sit
                              at positions 1..K.
  labels           int32 [L]  unshifted targets, -1 = ignored.
  token_mask       bool  [L]  real tokens (False for eos padding and slots).
  slot_mask        bool  [K]  slot k holds a box (slot 0 = whole image).
  slot_person_ids  int32 [K]  PG token per slot (`<|det0|>` for the image,
                              `<|det{i+1}|>` for person detection i, 0
                              otherwise; `sequence.slot_person_ids`).
  visual == "features":  visual_features float32 [K, F] (released 2048-d
                              features, zero rows for empty slots).
  visual == "vit":       image uint8 [H, W, 3] (or float32 in [-1, 1]) and
                              boxes float32 [K, 4] (x1, y1, x2, y2) as
                              fractions of the image size.

Visual slots: a per-box feature (the released feature, or the
shared ViT's patch grid RoI-Aligned to the box and averaged, the analogue of
the official ROIAlign + res5 + spatial mean) goes through
Dropout -> Dense(D) -> ReLU -> LayerNorm(eps 1e-12) (official
`SimpleDetector`); person grounding adds `wte(slot_person_ids)`, and the
official always-on subject embedding adds `subject_embed[0]`. The slot
vectors replace the token embeddings at positions 1..K where `slot_mask` is
set; empty slots keep `wte(<|endoftext|>)` (the official code zero-fills
empty slots up to the batch's largest box count and keeps eos beyond it, a
batch-dependent rule; ours is the same for every batch). Position embeddings
are added afterwards, inside GPT-2.

Attention: `attention_mask=True` (our default, an improvement) hides padding
keys (`token_mask`, plus the filled slots); False is the official behaviour
(causal mask only, padding attended).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from relations.commonsense import gpt2
from relations.commonsense.losses import sequence_scores
from relations.commonsense.text.sequence import IGNORE
from relations.nn import vit as vit_lib
from relations.nn.roi_align import roi_align_mean


class VisualProjection(nn.Module):
  """Official `SimpleDetector`: LN(ReLU(Dense(Dropout(feature))))."""

  width: int
  dropout: float = 0.1
  ln_scale_init: float = 1.0

  @nn.compact
  def __call__(self, feats, train: bool):
    x = nn.Dropout(self.dropout)(feats, deterministic=not train)
    x = nn.Dense(
      self.width,
      kernel_init=nn.with_logical_partitioning(
        nn.initializers.normal(0.02), ("visual_in", "embed")
      ),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("embed",)),
    )(x)
    x = jax.nn.relu(x)
    return nn.LayerNorm(epsilon=1e-12, scale_init=nn.initializers.constant(self.ln_scale_init))(x)


class VLGenerator(nn.Module):
  """See the module docstring.

  Attributes:
    lm: keyword arguments of `gpt2.GPT2` (sizes, vocab_size, dropout, ...).
    visual: "features" (released 2048-d), "vit" (shared ViT + RoI-Align) or
      "none" (text-only model; no visual parameters).
    vit: keyword arguments of `vit.Model` for visual == "vit".
    roi_samples: RoI-Align sampling points per axis.
    num_slots: K, visual slots after `<|b_img|>`.
    person_grounding: add `wte(slot_person_ids)` to the slots (PG).
    subject_ids: add the learned `subject_embed[0]` (official default on).
    attention_mask: hide padding keys (False = official, causal only).
    visual_dropout: dropout on the per-box feature before the projection.
    slot_scale_init: initial LayerNorm scale of the projection (official 1.0;
      a from-scratch LM has N(0, 0.02) token embeddings, and unit-variance
      slots would drown the `<|detN|>` grounding signal added to them, so
      small models start at 0.02).
  """

  lm: Any = None
  visual: str = "features"
  vit: Any = None
  roi_samples: int = 4
  num_slots: int = 15
  person_grounding: bool = True
  subject_ids: bool = True
  attention_mask: bool = True
  visual_dropout: float = 0.1
  slot_scale_init: float = 1.0

  def setup(self):
    self.decoder = gpt2.GPT2(**dict(self.lm or {}), name="lm")
    if self.visual not in ("features", "vit", "none"):
      raise ValueError(f"visual must be 'features', 'vit' or 'none', got {self.visual!r}")
    if self.visual == "vit":
      self.encoder = vit_lib.Model(**dict(self.vit or {}), name="vit")
    if self.visual != "none":
      self.project = VisualProjection(
        self.decoder.width, self.visual_dropout, self.slot_scale_init, name="visual_proj"
      )
      if self.subject_ids:
        self.subject_embed = self.param(
          "subject_embed",
          nn.with_logical_partitioning(nn.initializers.normal(0.02), (None, "embed")),
          (2, self.decoder.width),
          jnp.float32,
        )

  # ------------------------------------------------------------ visual slots
  def slot_embeddings(self, batch, train: bool = False) -> jax.Array:
    """[B, K, D] slot vectors (meaningful where batch["slot_mask"])."""
    if self.visual == "features":
      feats = batch["visual_features"].astype(jnp.float32)
    else:
      img = batch["image"]
      if img.dtype == jnp.uint8:  # host batches are uint8 (`task.encode`)
        img = img.astype(jnp.float32) / 127.5 - 1.0
      _, out = self.encoder(img, train=train)
      feats = roi_align_mean(out["patch_grid"], batch["boxes"], self.roi_samples)
    x = self.project(feats, train)
    if self.person_grounding:
      x = x + self.decoder.embed(batch["slot_person_ids"]).astype(x.dtype)
    if self.subject_ids:
      x = x + self.subject_embed[0]
    return x

  def input_embeddings(
    self, batch, length: int | None = None, train: bool = False
  ) -> tuple[jax.Array, jax.Array]:
    """Token embeddings with slots written in, and the key mask.

    Args:
      batch: see the module docstring.
      length: use only the first `length` positions (a generation prompt).
      train: dropout on.

    Returns:
      (embeds [B, T, D], key_mask bool [B, T]); T = length or L.
    """
    ids = batch["input_ids"]
    mask = batch["token_mask"].astype(bool)
    if length is not None:
      ids, mask = ids[:, :length], mask[:, :length]
    emb = self.decoder.embed(ids)
    if self.visual != "none":
      k = self.num_slots
      slot_mask = batch["slot_mask"].astype(bool)
      slots = self.slot_embeddings(batch, train).astype(emb.dtype)
      cur = emb[:, 1 : 1 + k]
      emb = emb.at[:, 1 : 1 + k].set(jnp.where(slot_mask[..., None], slots, cur))
      mask = mask.at[:, 1 : 1 + k].set(mask[:, 1 : 1 + k] | slot_mask)
    return emb, mask

  def __call__(self, batch, train: bool = False, return_logits: bool = True):
    """Teacher-forced forward pass: (logits [B, L, V], {"hidden": ...})."""
    emb, mask = self.input_embeddings(batch, train=train)
    logits, out = self.decoder(
      embeds=emb,
      key_mask=mask if self.attention_mask else None,
      train=train,
      return_logits=return_logits,
    )
    del out["kv_cache"]
    out["key_mask"] = mask
    return logits, out

  # ------------------------------------------------------------ decoding
  def prefill(self, batch, prompt_len: int):
    """Runs the prompts once; see `generation.decode`.

    Returns:
      (logits [B, V] of the last prompt position, the prompts' keys/values
      per layer [B, P, H, Dh], their key mask bool [B, P] or None).
    """
    emb, mask = self.input_embeddings(batch, length=prompt_len)
    b = emb.shape[0]
    cache = gpt2.init_cache(self.decoder, b, prompt_len)
    key_mask = mask if self.attention_mask else None
    _, out = self.decoder(
      embeds=emb, key_mask=key_mask, kv_cache=cache, cache_index=0, return_logits=False
    )
    logits = self.decoder.logits(out["hidden"][:, -1])
    return logits, out["kv_cache"], key_mask

  def step(self, tokens, cache, index, prefix, prefix_mask):
    """Rows continuing shared prefixes by `tokens` at generated position `index`."""
    logits, out = self.decoder(
      tokens, kv_cache=cache, cache_index=index, prefix=prefix, prefix_mask=prefix_mask
    )
    return logits[:, -1], out["kv_cache"]

  def continuation_scores(self, batch, prefix_len: int, num_candidates: int):
    """Acc@50 scoring with the shared prompt computed once.

    `batch` holds G queries' prompts and their candidates: the first
    `prefix_len` positions of row g (`input_ids`, `token_mask`, visual
    inputs) are the query's shared prompt; `cand_ids` / `cand_labels` /
    `cand_mask` int32/int32/bool [G, C, L - prefix_len] are the C
    candidates' continuations (relation token, inference, `<|e_in|>`,
    padding) with their labels (unshifted, -1 = ignored). The prompt runs
    once per query; the G * C continuations attend to its keys/values in
    place. Equal to the teacher-forced forward pass of each full candidate
    sequence (`__call__` + `sequence_scores`) up to float rounding.

    With `cand_score_pos` int32 [G, K] in the batch (`continuation_score_positions`: flat
    positions c * W + t of the candidates whose next label is scored, -1 padding), only those K
    positions go through the vocabulary projection instead of all C * W.

    Returns:
      (summed NLL [G, C] float32, labelled tokens [G, C] int32).
    """
    emb, mask = self.input_embeddings(batch, length=prefix_len)
    g = emb.shape[0]
    cache = gpt2.init_cache(self.decoder, g, prefix_len)
    prefix_mask = mask if self.attention_mask else None
    _, out = self.decoder(
      embeds=emb, key_mask=prefix_mask, kv_cache=cache, cache_index=0, return_logits=False
    )
    ids = batch["cand_ids"].reshape(g * num_candidates, -1)
    cmask = batch["cand_mask"].reshape(g * num_candidates, -1)
    labels = batch["cand_labels"].reshape(g * num_candidates, -1)
    pos = batch.get("cand_score_pos")
    logits, out = self.decoder(
      ids,
      key_mask=cmask if self.attention_mask else None,
      prefix=out["kv_cache"],
      prefix_mask=prefix_mask,
      return_logits=pos is None,
    )
    if pos is None:
      nll, n = sequence_scores(logits, labels)
      return nll.reshape(g, num_candidates), n.reshape(g, num_candidates)
    # Only the scored positions go through the vocabulary projection (most of the work of a
    # narrow model: 64 x 50k per position for `tiny`, against ~0.1M in its two blocks).
    w = ids.shape[1]
    hidden = out["hidden"].reshape(g, num_candidates * w, -1)
    valid = pos >= 0
    p = jnp.where(valid, pos, 0)
    h = jnp.take_along_axis(hidden, p[..., None], axis=1)  # [G, K, D]
    tgt = jnp.take_along_axis(labels.reshape(g, -1), p + 1, axis=1)  # the next position's label
    logp = jax.nn.log_softmax(self.decoder.logits(h), -1)
    tok = -jnp.take_along_axis(logp, jnp.where(valid, tgt, 0)[..., None], -1)[..., 0]
    tok = jnp.where(valid, tok, 0.0)
    row = p // w  # the candidate of each scored position
    per_query = jax.vmap(lambda v, r: jax.ops.segment_sum(v, r, num_segments=num_candidates))
    return per_query(tok, row), per_query(valid.astype(jnp.int32), row)


def continuation_score_positions(labels: np.ndarray, num_real: int, step: int = 0) -> np.ndarray:
  """The scored positions of one query's candidates, for `continuation_scores`' `cand_score_pos`.

  Args:
    labels: int [C, W] the candidates' continuation labels (unshifted, -1 = ignored).
    num_real: candidates 0..num_real-1 are scored; rows after them (batch padding) are not.
    step: K is rounded up to a multiple of this (default: C * (W - 1) / 8, at least 32), so that
      queries share a few compiled shapes (a query's K depends on the query alone: its scores do
      not depend on the batch it lands in, nor on the number of processes).

  Returns:
    int32 [K]: flat positions c * W + t (t < W - 1) whose next token labels[c, t + 1] is scored,
    in order, padded with -1.
  """
  c, w = labels.shape
  scored = labels[:num_real, 1:] != IGNORE
  cc, tt = np.nonzero(scored)
  pos = (cc * w + tt).astype(np.int32)
  step = step or max(32, -(-c * (w - 1) // 8))
  k = min(c * (w - 1), max(step, -(-len(pos) // step) * step))
  return np.concatenate([pos, np.full(k - len(pos), -1, np.int32)])


class VLDecoder:
  """`generation.decode` adapter for a `VLGenerator` with fixed prompt length."""

  def __init__(self, model: VLGenerator, prompt_len: int):
    self.model = model
    self.prompt_len = prompt_len

  def prefill(self, params, inputs):
    return self.model.apply({"params": params}, inputs, self.prompt_len, method=VLGenerator.prefill)

  def new_cache(self, n, length):
    lm = gpt2.GPT2(**dict(self.model.lm or {}))
    return gpt2.init_cache(lm, n, length)

  def step(self, params, tokens, cache, index, prefix, prefix_mask):
    return self.model.apply(
      {"params": params}, tokens, cache, index, prefix, prefix_mask, method=VLGenerator.step
    )


def Model(
  *,
  lm_variant: str | None = None,
  lm: dict | None = None,  # pylint: disable=invalid-name
  **kw,
) -> VLGenerator:
  """VLGenerator with GPT-2 size `lm_variant` (tiny/small/medium/large)."""
  return VLGenerator(lm={**gpt2.decode_variant(lm_variant), **(lm or {})}, **kw)
