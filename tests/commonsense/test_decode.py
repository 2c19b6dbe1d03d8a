"""Sampling filters and the cached sampling loop."""

import jax
import jax.numpy as jnp
import numpy as np

from relations.commonsense.generation import decode
from relations.commonsense.generation import sampling
from relations.commonsense import gpt2
from tests.commonsense.random_params import random_params


def test_nucleus_keeps_tokens_until_mass_is_crossed():
  probs = np.array([[0.5, 0.3, 0.15, 0.05]])
  keep = sampling.nucleus_keep(jnp.log(jnp.asarray(probs)), 0.9)
  # cumulative before: 0, .5, .8, .95 -> the third crosses 0.9 and is kept.
  np.testing.assert_array_equal(keep, [[True, True, True, False]])
  keep = sampling.nucleus_keep(jnp.log(jnp.asarray(probs)), 0.5)
  np.testing.assert_array_equal(keep, [[True, False, False, False]])
  keep = sampling.nucleus_keep(jnp.log(jnp.asarray(probs)), 0.1)
  np.testing.assert_array_equal(keep, [[True, False, False, False]])


def test_sample_frequencies_follow_the_renormalised_nucleus():
  # Unsorted vocabulary; nucleus 0.9 keeps ids 3, 0, 2 (0.5, 0.3, 0.15).
  probs = np.array([0.3, 0.05, 0.15, 0.5])
  logits = jnp.tile(jnp.log(jnp.asarray(probs))[None], (40000, 1))
  toks = np.asarray(sampling.sample(jax.random.PRNGKey(0), logits, top_p=0.9))
  freq = np.bincount(toks, minlength=4) / len(toks)
  want = np.array([0.3, 0.0, 0.15, 0.5]) / 0.95
  assert freq[1] == 0
  np.testing.assert_allclose(freq, want, atol=0.01)
  toks = np.asarray(sampling.sample(jax.random.PRNGKey(1), logits, top_k=2))
  freq = np.bincount(toks, minlength=4) / len(toks)
  np.testing.assert_allclose(freq, [0.375, 0, 0, 0.625], atol=0.01)
  toks = np.asarray(
    sampling.sample(jax.random.PRNGKey(2), logits, top_k=3, top_p=0.7)
  )  # keeps 3, 0
  assert set(np.unique(toks)) == {0, 3}
  toks = np.asarray(sampling.sample(jax.random.PRNGKey(3), logits, temperature=0.0))
  assert (toks == 3).all()


def test_unsorted_nucleus_keeps_exactly_the_sorted_nucleus():
  rng = np.random.default_rng(0)
  # Peaked and flat rows (a trained and a random-init LM), several masses.
  logits = np.concatenate([rng.normal(0, 4, (20, 3000)), rng.normal(0, 0.5, (20, 3000))]).astype(
    np.float32
  )
  order = np.argsort(-logits, axis=-1, kind="stable")
  for p in (0.1, 0.5, 0.9, 0.99):
    got = np.asarray(sampling.nucleus_keep_unsorted(jnp.asarray(logits), p))
    srt = np.take_along_axis(logits, order, -1)
    keep_sorted = np.asarray(sampling.nucleus_keep(jnp.asarray(srt), p))
    want = np.zeros_like(got)
    np.put_along_axis(want, order, keep_sorted, -1)
    np.testing.assert_array_equal(got, want)
    assert got.sum(-1).min() >= 1
  # The worked example of the nucleus test above, unsorted.
  probs = np.array([[0.3, 0.05, 0.15, 0.5]])
  keep = sampling.nucleus_keep_unsorted(jnp.log(jnp.asarray(probs)), 0.9)
  np.testing.assert_array_equal(keep, [[True, False, True, True]])


def test_both_nucleus_implementations_draw_from_the_same_distribution():
  probs = np.array([0.3, 0.05, 0.15, 0.5])
  logits = jnp.tile(jnp.log(jnp.asarray(probs))[None], (40000, 1))
  want = np.array([0.3, 0.0, 0.15, 0.5]) / 0.95
  for nucleus in ("threshold", "sorted"):
    toks = np.asarray(sampling.sample(jax.random.PRNGKey(5), logits, top_p=0.9, nucleus=nucleus))
    freq = np.bincount(toks, minlength=4) / len(toks)
    assert freq[1] == 0
    np.testing.assert_allclose(freq, want, atol=0.01)


def test_temperature_sharpens():
  probs = np.array([0.6, 0.4])
  logits = jnp.tile(jnp.log(jnp.asarray(probs))[None], (40000, 1))
  toks = np.asarray(sampling.sample(jax.random.PRNGKey(0), logits, temperature=0.5))
  # p^2 renormalised: .36 / .52
  np.testing.assert_allclose((toks == 0).mean(), 0.36 / 0.52, atol=0.01)


LM = gpt2.GPT2(vocab_size=50, num_layers=2, width=32, num_heads=4, max_len=64, dropout=0.0)
PARAMS = random_params(LM, jnp.zeros((1, 4), jnp.int32))


def _lm():
  return LM, jax.tree.map(jnp.asarray, PARAMS)


def test_greedy_cached_decoding_equals_uncached_argmax_loop():
  lm, params = _lm()
  prompts = np.random.default_rng(0).integers(0, 50, (3, 9))
  cfg = decode.SampleConfig(num_samples=2, max_new_tokens=6, temperature=0.0, stop_id=-1, pad_id=0)
  out = decode.make_sample_fn(decode.LMDecoder(lm), cfg)(
    params, {"tokens": jnp.asarray(prompts)}, jax.random.PRNGKey(0)
  )
  assert out.shape == (3, 2, 6)
  # Uncached reference: full forward passes over the growing sequence, kept
  # at one width (positions not yet generated hold 0; the causal mask hides
  # them from the position read), so the forward compiles once.
  forward = jax.jit(lambda p, s: lm.apply({"params": p}, s)[0])
  seq = np.concatenate([prompts, np.zeros((3, 6), prompts.dtype)], 1)
  for t in range(6):
    seq[:, 9 + t] = np.asarray(forward(params, seq)[:, 8 + t].argmax(-1))
  for s in range(2):
    np.testing.assert_array_equal(out[:, s], seq[:, 9:])


def test_rows_stop_at_stop_id_and_pad_afterwards():
  lm, params = _lm()
  prompts = jnp.asarray(np.random.default_rng(1).integers(0, 50, (2, 5)))
  cfg = decode.SampleConfig(num_samples=4, max_new_tokens=12, top_p=0.9, stop_id=7, pad_id=49)
  # Make token 7 likely (p ~ 0.3 per step) so rows stop early: its (tied)
  # embedding points along the mean final hidden state of the prompts.
  _, hid = lm.apply({"params": params}, prompts, return_logits=False)
  h = hid["hidden"].reshape(-1, hid["hidden"].shape[-1]).mean(0)
  params["wte"]["embedding"] = params["wte"]["embedding"].at[7].set(3.0 * h / jnp.sum(h * h))
  out = np.asarray(
    decode.make_sample_fn(decode.LMDecoder(lm), cfg)(
      params, {"tokens": prompts}, jax.random.PRNGKey(0)
    )
  )
  stopped = 0
  for row in out.reshape(8, 12).tolist():
    if 7 in row:
      stopped += 1
      i = row.index(7)
      assert all(x == 49 for x in row[i + 1 :])
  assert stopped >= 4
  cut = decode.cut_at_stop(out.reshape(8, 12), 7)
  assert all(7 not in r for r in cut)


def test_samples_of_one_prompt_differ_and_rng_is_reproducible():
  lm, params = _lm()
  prompts = jnp.asarray(np.random.default_rng(2).integers(0, 50, (2, 5)))
  cfg = decode.SampleConfig(num_samples=5, max_new_tokens=8, top_p=1.0)
  fn = decode.make_sample_fn(decode.LMDecoder(lm), cfg)
  a = np.asarray(fn(params, {"tokens": prompts}, jax.random.PRNGKey(3)))
  b = np.asarray(fn(params, {"tokens": prompts}, jax.random.PRNGKey(3)))
  np.testing.assert_array_equal(a, b)
  assert len({tuple(r) for r in a[0]}) > 1
