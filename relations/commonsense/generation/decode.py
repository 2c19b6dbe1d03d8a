"""Jitted, batched autoregressive sampling with a KV cache.

A *decoder* is any object with two pure methods (see `LMDecoder` and
`vl_generator.VLDecoder`):

  prefill(params, inputs, cache_len) -> (logits [B, V], cache, key_mask)
      runs the fixed-width prompts (length P, shared by all rows) into a fresh
      cache of `cache_len` slots; logits are those of the last prompt position;
      key_mask is bool [B, cache_len] or None (causal mask only).
  step(params, tokens [N, 1], cache, index, key_mask) -> (logits [N, V], cache)
      feeds one token per row at position `index`.

`make_sample_fn` returns one jitted function that prefills each prompt once,
then copies its cache to the `num_samples` rows that sample from it (instead of
running the same prompt `num_samples` times), and samples up to
`max_new_tokens` tokens in a `lax.while_loop` that stops early when every row
has produced `stop_id`. Rows that are done emit `pad_id`.

`make_decode_fn` is the entry point for either method: a `SampleConfig`
samples, a `beam.BeamConfig` runs beam search (`generation.beam`); both give
`fn(params, inputs, rng) -> tokens int32 [B, S, T]` in the same layout.
"""

from __future__ import annotations

import dataclasses
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
  stop_id: int = -1   # <|e_in|>; -1 = never stop early
  pad_id: int = 0     # emitted after stop_id


class LMDecoder:
  """Decoder for a plain `gpt2.GPT2` on token prompts `inputs["tokens"]` [B, P]."""

  def __init__(self, lm: gpt2.GPT2, cache_dtype: Any = jnp.float32):
    self.lm = lm
    self.cache_dtype = cache_dtype

  def prefill(self, params, inputs, cache_len):
    toks = inputs["tokens"]
    cache = gpt2.init_cache(self.lm, toks.shape[0], cache_len, self.cache_dtype)
    key_mask = inputs.get("key_mask")
    if key_mask is not None:
      key_mask = jnp.concatenate(
          [key_mask.astype(bool),
           jnp.ones((toks.shape[0], cache_len - toks.shape[1]), bool)], 1)
    _, out = self.lm.apply({"params": params}, toks, kv_cache=cache,
                           cache_index=0, key_mask=key_mask,
                           return_logits=False)
    logits = self.lm.apply({"params": params}, out["hidden"][:, -1],
                           method=gpt2.GPT2.logits)
    return logits, out["kv_cache"], key_mask

  def step(self, params, tokens, cache, index, key_mask):
    logits, out = self.lm.apply({"params": params}, tokens, kv_cache=cache,
                                cache_index=index, key_mask=key_mask)
    return logits[:, -1], out["kv_cache"]


def _prompt_len(inputs) -> int:
  return max(x.shape[1] for x in jax.tree.leaves(inputs) if x.ndim >= 2)


def make_sample_fn(decoder, cfg: SampleConfig,
                   prompt_len: int | None = None) -> Callable[..., Any]:
  """Returns jitted `fn(params, inputs, rng) -> tokens int32 [B, S, T]`.

  S = cfg.num_samples, T = cfg.max_new_tokens. Row (b, s) holds the sampled
  continuation of prompt b, `pad_id` after the first `stop_id`.

  Args:
    decoder: see the module docstring.
    cfg: sampling settings.
    prompt_len: P, if the longest 2-D input is not the prompt length.
  """
  s, t = cfg.num_samples, cfg.max_new_tokens

  def fn(params, inputs, rng):
    p = prompt_len or _prompt_len(inputs)
    logits, cache, key_mask = decoder.prefill(params, inputs, p + t)
    b = logits.shape[0]
    rep = lambda x: jnp.repeat(x, s, axis=0)
    logits, cache = rep(logits), jax.tree.map(rep, cache)
    key_mask = None if key_mask is None else rep(key_mask)
    n = b * s
    toks = jnp.full((n, t), cfg.pad_id, jnp.int32)
    done = jnp.zeros((n,), bool)

    def cond(state):
      i, _, done, *_ = state
      return (i < t) & ~jnp.all(done)

    def body(state):
      i, toks, done, cache, logits, rng = state
      rng, sub = jax.random.split(rng)
      nxt = sampling.sample(sub, logits, temperature=cfg.temperature,
                            top_k=cfg.top_k, top_p=cfg.top_p)
      nxt = jnp.where(done, cfg.pad_id, nxt)
      toks = jax.lax.dynamic_update_slice(toks, nxt[:, None], (0, i))
      done = done | (nxt == cfg.stop_id)
      logits, cache = decoder.step(params, nxt[:, None], cache, p + i,
                                   key_mask)
      return i + 1, toks, done, cache, logits, rng

    state = (jnp.int32(0), toks, done, cache, logits, rng)
    _, toks, *_ = jax.lax.while_loop(cond, body, state)
    return toks.reshape(b, s, t)

  return jax.jit(fn)


def make_decode_fn(decoder, cfg: SampleConfig | beam.BeamConfig,
                   prompt_len: int | None = None) -> Callable[..., Any]:
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
  raise TypeError(f"decoding config must be a SampleConfig or a BeamConfig, "
                  f"got {type(cfg).__name__}")


def cut_at_stop(tokens, stop_id: int) -> list[list[int]]:
  """Host-side: each row of int [N, T] up to (excluding) its first stop_id."""
  out = []
  for row in jax.device_get(tokens).tolist():
    out.append(row[:row.index(stop_id)] if stop_id in row else row)
  return out
