"""Jitted, batched beam search with a KV cache (Hugging Face semantics).

`make_beam_fn(decoder, cfg)` returns one jitted function that prefills each
prompt once (its `num_beams` rows attend to that one copy of the prompt's
keys and values), and then, in a `lax.while_loop`, extends every beam by one
token per step, reordering the rows of the generated tokens' KV cache by the
index of the beam each survivor came from. The decoder is the
same object the sampler uses (`decode.LMDecoder`, `vl_generator.VLDecoder`).

The algorithm is the one of `transformers` `generate(num_beams=K,
do_sample=False)` (its vectorised `_beam_search`), step for step:

1. Candidates: running score (sum of log-probs of the beam's tokens) +
   log_softmax(logits); the top 2K of the K x V candidates of each prompt.
   (Initially only beam 0 is live: the others start at -1e9, so the first step
   does not pick the same token K times.)
2. A candidate "finishes" when its token is `stop_id` (`<|e_in|>`) or it
   reaches `max_new_tokens`. Running beams for the next step: the best K
   candidates that did not finish.
3. Finished candidates among the best K (of the 2K) enter the prompt's pool
   of K finished hypotheses with the length-penalised score

       score = sum_logprobs / num_new_tokens ** length_penalty

   where num_new_tokens counts the generated tokens including `stop_id` (not
   the prompt). length_penalty > 0 favours longer hypotheses, < 0 shorter,
   0 ranks by total log-probability. The pool keeps the K best; a finished
   hypothesis leaves it only when displaced by a better one.
4. Stopping (`early_stopping`): False (HF's default; what the official
   `--do_sample 0` asks for) stops a prompt once its pool is full and the best
   running beam, scored at its current length, cannot beat the pool's worst;
   "never" scores it at `max_new_tokens` when length_penalty > 0 (the exact
   bound); True stops as soon as the pool is full. The loop ends when every
   prompt has stopped, or after `max_new_tokens` steps.

Output: the `num_return` best finished hypotheses per prompt, best first,
in the sampler's layout ([B, R, T] ids, `stop_id` kept, `pad_id` after it).

Differences from the official VisualCOMET `beam_search_sequence`,
which predates HF's current implementation and is not reproduced: it divides
by the length of the whole sequence including the prompt and excluding the
end token, always runs all steps, turns the last step's token into the end
token, accepts end tokens ranked below K, and returns the pool in insertion
order rather than best first. Temperature is not applied (HF ignores it when
not sampling; the official code passes 1).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

NEG = -1e9  # HF's "impossible" score offset


@dataclasses.dataclass(frozen=True)
class BeamConfig:
  """Beam search settings; defaults are the official `--do_sample 0` ones.

  Attributes:
    num_beams: K, beams (and finished hypotheses kept) per prompt.
    num_return: R <= K hypotheses returned per prompt (0 = K).
    max_new_tokens: T, generated tokens at most (including `stop_id`).
    length_penalty: exponent of the generated length dividing the summed
      log-probability of a finished hypothesis (HF's `length_penalty`).
    early_stopping: False, True or "never" (HF's `early_stopping`).
    stop_id: <|e_in|>; -1 = never stop before T tokens.
    pad_id: emitted after `stop_id`.
  """

  num_beams: int = 5
  num_return: int = 0
  max_new_tokens: int = 20
  length_penalty: float = 1.0
  early_stopping: bool | str = False
  stop_id: int = -1
  pad_id: int = 0

  def __post_init__(self):
    if self.num_beams < 1:
      raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
    if not 0 <= self.num_return <= self.num_beams:
      raise ValueError(
        f"num_return must be in [0, num_beams={self.num_beams}], got {self.num_return}"
      )
    if self.early_stopping not in (False, True, "never"):
      raise ValueError(
        f"early_stopping must be False, True or 'never', got {self.early_stopping!r}"
      )


def _take(x, idx):
  """x [B, N, ...] gathered along axis 1 by idx [B, M] -> [B, M, ...]."""
  idx = idx.reshape(idx.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, idx, axis=1)


def make_beam_fn(decoder, cfg: BeamConfig, prompt_len: int | None = None) -> Callable[..., Any]:
  """Returns jitted `fn(params, inputs) -> (tokens int32 [B, R, T], scores)`.

  Args:
    decoder: `prefill` / `step` object (see `generation.decode`).
    cfg: beam settings; R = cfg.num_return or cfg.num_beams,
      T = cfg.max_new_tokens.
    prompt_len: unused (the decoder knows its prompt); kept for callers.

  Returns:
    A function giving, per prompt, the R best finished hypotheses (best
    first; ids after the prompt, `pad_id` after `stop_id`) and their
    length-penalised scores, float32 [B, R].
  """
  del prompt_len
  k, t = cfg.num_beams, cfg.max_new_tokens
  r = cfg.num_return or k
  lp = float(cfg.length_penalty)
  es = cfg.early_stopping

  def fn(params, inputs):
    logits, prefix, prefix_mask = decoder.prefill(params, inputs)
    b, v = logits.shape
    # The beams of a prompt attend to its one prefilled copy of the prompt's
    # keys/values (never copied or reordered: beams stay within their
    # prompt); only their own caches of generated tokens are reordered.
    logits = jnp.repeat(logits, k, axis=0)
    cache = decoder.new_cache(b * k, t)
    pos = jnp.arange(t)
    top_k_mask = jnp.arange(2 * k) < k
    base = (jnp.arange(b) * k)[:, None]

    state = dict(
      i=jnp.int32(0),
      logits=logits,
      cache=cache,
      run_seq=jnp.full((b, k, t), cfg.pad_id, jnp.int32),
      run_score=jnp.zeros((b, k), jnp.float32).at[:, 1:].set(NEG),
      fin_seq=jnp.full((b, k, t), cfg.pad_id, jnp.int32),
      fin_score=jnp.full((b, k), NEG, jnp.float32),
      fin=jnp.zeros((b, k), bool),
      open=jnp.ones((b,), bool),
    )  # improvement still possible

    def cond(s):
      going = (s["i"] < t) & jnp.any(s["open"])
      if es is True:
        going &= ~jnp.all(s["fin"])
      return going

    def body(s):
      i = s["i"]
      logp = jax.nn.log_softmax(s["logits"].astype(jnp.float32), -1)
      cand = logp.reshape(b, k, v) + s["run_score"][:, :, None]
      top, idx = jax.lax.top_k(cand.reshape(b, k * v), 2 * k)  # [B, 2K]
      src, tok = idx // v, (idx % v).astype(jnp.int32)
      seq = jnp.where(pos == i, tok[:, :, None], _take(s["run_seq"], src))
      hits = (tok == cfg.stop_id) | (i + 1 == t)

      # Running beams: the best K candidates that did not finish.
      run_cand = top + hits.astype(jnp.float32) * NEG
      _, nxt = jax.lax.top_k(run_cand, k)
      run_seq, run_score = _take(seq, nxt), _take(run_cand, nxt)
      run_src, run_tok = _take(src, nxt), _take(tok, nxt)

      # Finished pool: merge the newly finished among the best K candidates.
      just = hits & top_k_mask[None]
      score = top / jnp.float32(i + 1) ** lp
      if es is True:
        full = jnp.all(s["fin"], axis=1, keepdims=True)
        score += full.astype(jnp.float32) * NEG
      score += (~s["open"])[:, None].astype(jnp.float32) * NEG
      score += (~just).astype(jnp.float32) * NEG
      m_score = jnp.concatenate([s["fin_score"], score], 1)
      _, keep = jax.lax.top_k(m_score, k)
      fin_seq = _take(jnp.concatenate([s["fin_seq"], seq], 1), keep)
      fin_score = _take(m_score, keep)
      fin = _take(jnp.concatenate([s["fin"], just], 1), keep)

      # Reorder the cache to the surviving beams, feed their new tokens.
      rows = (base + run_src).reshape(-1)
      cache = jax.tree.map(lambda x: x[rows], s["cache"])
      logits, cache = decoder.step(params, run_tok.reshape(-1, 1), cache, i, prefix, prefix_mask)

      # Can the best running beam still beat the worst finished one?
      n = jnp.float32(t if (es == "never" and lp > 0) else i + 1)
      best = run_score[:, 0] / n**lp
      worst = jnp.where(fin, jnp.min(fin_score, 1, keepdims=True), NEG)
      still = jnp.any(best[:, None] > worst, axis=1)
      return dict(
        i=i + 1,
        logits=logits,
        cache=cache,
        run_seq=run_seq,
        run_score=run_score,
        fin_seq=fin_seq,
        fin_score=fin_score,
        fin=fin,
        open=s["open"] & still,
      )

    s = jax.lax.while_loop(cond, body, state)
    return s["fin_seq"][:, :r], s["fin_score"][:, :r]

  return jax.jit(fn)
