"""Jitted, batched autoregressive sampling with a KV cache.

A *decoder* is any object with three pure methods (see `LMDecoder` and
`vl_generator.VLDecoder`):

  prefill(params, inputs) -> (logits [B, V], prefix, prefix_mask)
      runs the fixed-width prompts (length P, shared by all rows) once;
      logits are those of the last prompt position, `prefix` the prompts'
      keys/values (per layer {"k", "v"} [B, P, H, Dh]) and prefix_mask bool
      [B, P] or None (causal mask only).
  new_cache(n, length) -> an empty KV cache of `length` slots for n rows.
  step(params, tokens [N, 1], cache, index, prefix, prefix_mask)
      -> (logits [N, V], cache)
      feeds one token per row at generated position `index` (0-based after
      the prompt); row r continues prompt r // (N / B).

`make_sample_fn` returns one jitted function that prefills each prompt once
and lets its `num_samples` rows attend to that one copy of the prompt's keys
and values (`gpt2.GPT2(prefix=...)`: neither the prompt's forward pass nor
its cache is repeated per sample; each row's own cache holds only the
generated tokens), and samples up to `max_new_tokens` tokens in a
`lax.while_loop` that stops early when every row has produced `stop_id`.
Rows that are done emit `pad_id`.

Random numbers: a single key is split once per step and one draw covers all
rows (the batch's samples depend on the whole batch). A key per prompt ([B]
keys) gives each prompt its own stream (`fold_in(key, step)`, then split per
sample), so a prompt's samples do not depend on which other prompts share
its batch or its process: the sharded evaluator uses this.

`make_decode_fn` is the entry point for either method: a `SampleConfig`
samples, a `beam.BeamConfig` runs beam search (`generation.beam`); both give
`fn(params, inputs, rng) -> tokens int32 [B, S, T]` in the same layout.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from relations.commonsense.generation import beam
from relations.commonsense.generation import sampling
from relations.commonsense import gpt2


@dataclasses.dataclass(frozen=True)
class SampleConfig:
  """Decoding settings; defaults are the official ones."""

  num_samples: int = 5
  max_new_tokens: int = 20
  top_p: float = 0.9
  top_k: int = 0
  temperature: float = 1.0
  stop_id: int = -1  # <|e_in|>; -1 = never stop early
  pad_id: int = 0  # emitted after stop_id
  nucleus: str = "threshold"  # or "sorted" (`sampling` module docstring)


class LMDecoder:
  """Decoder for a plain `gpt2.GPT2` on token prompts `inputs["tokens"]` [B, P]
  (optional `inputs["key_mask"]` bool [B, P] hides padding keys)."""

  def __init__(self, lm: gpt2.GPT2, cache_dtype: Any = jnp.float32):
    self.lm = lm
    self.cache_dtype = cache_dtype

  def prefill(self, params, inputs):
    toks = inputs["tokens"]
    cache = gpt2.init_cache(self.lm, toks.shape[0], toks.shape[1], self.cache_dtype)
    key_mask = inputs.get("key_mask")
    if key_mask is not None:
      key_mask = key_mask.astype(bool)
    _, out = self.lm.apply(
      {"params": params},
      toks,
      kv_cache=cache,
      cache_index=0,
      key_mask=key_mask,
      return_logits=False,
    )
    logits = self.lm.apply({"params": params}, out["hidden"][:, -1], method=gpt2.GPT2.logits)
    return logits, out["kv_cache"], key_mask

  def new_cache(self, n, length):
    return gpt2.init_cache(self.lm, n, length, self.cache_dtype)

  def step(self, params, tokens, cache, index, prefix, prefix_mask):
    logits, out = self.lm.apply(
      {"params": params},
      tokens,
      kv_cache=cache,
      cache_index=index,
      prefix=prefix,
      prefix_mask=prefix_mask,
    )
    return logits[:, -1], out["kv_cache"]


def per_prompt_keys(rng) -> bool:
  """Whether `rng` holds one key per prompt ([B] typed or [B, 2] raw keys)."""
  if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key):
    return rng.ndim == 1
  return rng.ndim == 2


def make_sample_fn(decoder, cfg: SampleConfig, prompt_len: int | None = None) -> Callable[..., Any]:
  """Returns jitted `fn(params, inputs, rng) -> tokens int32 [B, S, T]`.

  S = cfg.num_samples, T = cfg.max_new_tokens. Row (b, s) holds the sampled
  continuation of prompt b, `pad_id` after the first `stop_id`. `rng` is one
  key, or one key per prompt (see the module docstring).

  Args:
    decoder: see the module docstring.
    cfg: sampling settings.
    prompt_len: unused (the decoder knows its prompt); kept for callers.
  """
  del prompt_len
  s, t = cfg.num_samples, cfg.max_new_tokens
  draw = functools.partial(
    sampling.sample,
    temperature=cfg.temperature,
    top_k=cfg.top_k,
    top_p=cfg.top_p,
    nucleus=cfg.nucleus,
  )

  def fn(params, inputs, rng):
    logits, prefix, prefix_mask = decoder.prefill(params, inputs)
    b = logits.shape[0]
    n = b * s
    logits = jnp.repeat(logits, s, axis=0)  # [N, V]: cheap, the cache is not
    cache = decoder.new_cache(n, t)
    toks = jnp.full((n, t), cfg.pad_id, jnp.int32)
    done = jnp.zeros((n,), bool)
    rowwise = per_prompt_keys(rng)

    def cond(state):
      i, _, done, *_ = state
      return (i < t) & ~jnp.all(done)

    def body(state):
      i, toks, done, cache, logits, rng = state
      if rowwise:
        keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, i), s))(rng).reshape(n, -1)
        if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key):
          keys = keys.reshape(n)
        nxt = jax.vmap(lambda k, l: draw(k, l[None])[0])(keys, logits)
      else:
        rng, sub = jax.random.split(rng)
        nxt = draw(sub, logits)
      nxt = jnp.where(done, cfg.pad_id, nxt)
      toks = jax.lax.dynamic_update_slice(toks, nxt[:, None], (0, i))
      done = done | (nxt == cfg.stop_id)
      logits, cache = decoder.step(params, nxt[:, None], cache, i, prefix, prefix_mask)
      return i + 1, toks, done, cache, logits, rng

    state = (jnp.int32(0), toks, done, cache, logits, rng)
    _, toks, *_ = jax.lax.while_loop(cond, body, state)
    return toks.reshape(b, s, t)

  return jax.jit(fn)


def make_decode_fn(
  decoder, cfg: SampleConfig | beam.BeamConfig, prompt_len: int | None = None
) -> Callable[..., Any]:
  """Jitted `fn(params, inputs, rng) -> tokens int32 [B, S, T]` for `cfg`.

  A `SampleConfig` gives `make_sample_fn` (S = num_samples samples); a
  `beam.BeamConfig` gives the S = num_return (default num_beams) best beam
  hypotheses, best first (rng unused: beam search is deterministic).
  """
  if isinstance(cfg, SampleConfig):
    return make_sample_fn(decoder, cfg, prompt_len)
  if isinstance(cfg, beam.BeamConfig):
    beam_fn = beam.make_beam_fn(decoder, cfg, prompt_len)
    return lambda params, inputs, rng: beam_fn(params, inputs)[0]
  raise TypeError(
    f"decoding config must be a SampleConfig or a BeamConfig, got {type(cfg).__name__}"
  )


def cut_at_stop(tokens, stop_id: int) -> list[list[int]]:
  """Host-side: each row of int [N, T] up to (excluding) its first stop_id."""
  out = []
  for row in jax.device_get(tokens).tolist():
    out.append(row[: row.index(stop_id)] if stop_id in row else row)
  return out
