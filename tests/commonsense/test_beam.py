"""Beam search: exhaustive width = brute force, width 1 = greedy, = HF."""

import itertools
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from relations.commonsense import evaluator as commonsense_predict
from relations.commonsense.generation import beam
from relations.commonsense.generation import decode
from relations.commonsense import gpt2
from relations.commonsense import gpt2_import
from tests.commonsense.random_params import random_params

V, STOP, PAD, P, T = 4, 3, 2, 3, 3


LM = gpt2.GPT2(vocab_size=V, num_layers=2, width=16, num_heads=2, max_len=16, dropout=0.0)
FORWARD = jax.jit(lambda p, toks: LM.apply({"params": p}, toks)[0])


def _lm(scale):
  """Tiny random GPT-2; `scale` spreads the (tied) logits apart."""
  params = random_params(LM, jnp.zeros((1, 4), jnp.int32))
  params["wte"]["embedding"] = params["wte"]["embedding"] * scale
  return LM, jax.tree.map(jnp.asarray, params)


def _hypotheses():
  """Every finished hypothesis of <= T tokens: stopped early, or T long."""
  out = []
  for n in range(1, T + 1):
    for pre in itertools.product([x for x in range(V) if x != STOP], repeat=n - 1):
      out += [pre + (STOP,)] if n < T else [pre + (x,) for x in range(V)]
  return out


def _brute_force(lm, params, prompts, length_penalty):
  """Per prompt: all hypotheses sorted by sum log p / len ** penalty."""
  hyps = _hypotheses()
  ranked = []
  for prompt in np.asarray(prompts):
    # Uncached full forward passes; hypotheses padded to T (causal model:
    # the padding cannot change the log-probs of the tokens before it).
    seqs = np.array([list(prompt) + list(h) + [0] * (T - len(h)) for h in hyps])
    logits = FORWARD(params, jnp.asarray(seqs))
    logp = np.asarray(jax.nn.log_softmax(logits, -1), np.float64)
    scored = []
    for j, h in enumerate(hyps):
      s = sum(logp[j, P - 1 + n, tok] for n, tok in enumerate(h))
      scored.append((s / len(h) ** length_penalty, list(h) + [PAD] * (T - len(h))))
    scored.sort(key=lambda x: -x[0])
    ranked.append(scored)
  return ranked


# The first case of each parametrisation runs in the fast tier, the others (5-10 s each) in the slow.
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
  "length_penalty", [0.0, pytest.param(1.0, marks=_SLOW), pytest.param(-1.5, marks=_SLOW)]
)
def test_exhaustive_width_ranks_every_hypothesis_like_brute_force(length_penalty):
  lm, params = _lm(30.0)
  prompts = jnp.asarray(np.random.default_rng(0).integers(0, V, (2, P)))
  want = _brute_force(lm, params, prompts, length_penalty)
  k = len(_hypotheses())  # 40: no hypothesis is ever pruned
  cfg = beam.BeamConfig(
    num_beams=k,
    max_new_tokens=T,
    stop_id=STOP,
    pad_id=PAD,
    length_penalty=length_penalty,
    early_stopping="never",
  )
  toks, scores = beam.make_beam_fn(decode.LMDecoder(lm), cfg)(params, {"tokens": prompts})
  assert toks.shape == (2, k, T) and scores.shape == (2, k)
  for b in range(2):
    gaps = -np.diff([s for s, _ in want[b]])
    assert gaps.min() > 1e-4  # the ranking is not decided by rounding
    assert np.asarray(toks[b]).tolist() == [h for _, h in want[b]]
    np.testing.assert_allclose(scores[b], [s for s, _ in want[b]], rtol=1e-5, atol=1e-5)


def test_narrow_beam_scores_are_the_brute_force_scores_of_its_hypotheses():
  # With 4 beams hypotheses get pruned; each returned one must still carry
  # its exact log-probability (cache rows follow their beams), best first.
  lm, params = _lm(30.0)
  prompts = jnp.asarray(np.random.default_rng(0).integers(0, V, (2, P)))
  want = _brute_force(lm, params, prompts, 0.0)
  cfg = beam.BeamConfig(
    num_beams=4, num_return=3, max_new_tokens=T, stop_id=STOP, pad_id=PAD, length_penalty=0.0
  )
  toks, scores = beam.make_beam_fn(decode.LMDecoder(lm), cfg)(params, {"tokens": prompts})
  assert toks.shape == (2, 3, T)
  for b in range(2):
    table = {tuple(h): s for s, h in want[b]}
    rows = [tuple(r) for r in np.asarray(toks[b]).tolist()]
    np.testing.assert_allclose(scores[b], [table[r] for r in rows], rtol=1e-5, atol=1e-5)
    assert (np.diff(scores[b]) < 0).all()
    # For these prompts the overall best survives the pruning (checked by
    # the brute force), so it must come first.
    assert list(rows[0]) == want[b][0][1]


@pytest.mark.parametrize(
  "stop_id,length_penalty", [(STOP, 0.0), pytest.param(-1, 1.0, marks=_SLOW)]
)
def test_width_one_equals_greedy(stop_id, length_penalty):
  lm, params = _lm(3.0)
  prompts = jnp.asarray(np.random.default_rng(1).integers(0, V, (5, P)))
  greedy = decode.make_sample_fn(
    decode.LMDecoder(lm),
    decode.SampleConfig(
      num_samples=1, max_new_tokens=8, temperature=0.0, stop_id=stop_id, pad_id=PAD
    ),
  )(params, {"tokens": prompts}, jax.random.PRNGKey(0))
  one = decode.make_decode_fn(
    decode.LMDecoder(lm),
    beam.BeamConfig(
      num_beams=1, max_new_tokens=8, stop_id=stop_id, pad_id=PAD, length_penalty=length_penalty
    ),
  )(params, {"tokens": prompts}, None)
  np.testing.assert_array_equal(one, greedy)
  if stop_id >= 0:  # the case is not vacuous: some rows stop early
    assert (np.asarray(one)[:, 0, :-1] == STOP).any()


def test_bad_configs_are_rejected():
  with pytest.raises(ValueError, match="num_return must be in"):
    beam.BeamConfig(num_beams=2, num_return=3)
  with pytest.raises(ValueError, match="early_stopping must be"):
    beam.BeamConfig(early_stopping="always")
  with pytest.raises(TypeError, match="SampleConfig or a BeamConfig"):
    decode.make_decode_fn(None, dict(num_beams=2))


def test_evaluator_method_selects_beam_search_and_official_file_name():
  ec = ml_collections.ConfigDict(
    dict(
      split="val",
      method="beam",
      num_samples=5,
      max_new_tokens=20,
      top_p=0.9,
      top_k=0,
      temperature=1.0,
    )
  )
  assert commonsense_predict.decode_config(ec, stop_id=9, pad_id=2) == (
    beam.BeamConfig(
      num_beams=5, max_new_tokens=20, length_penalty=1.0, early_stopping=False, stop_id=9, pad_id=2
    )
  )
  assert commonsense_predict.generation_file_name(ec) == (
    "val_sample_0_num_5_top_k_0_top_p_0.9.json"
  )
  ec.length_penalty, ec.early_stopping = 0.5, "never"
  cfg = commonsense_predict.decode_config(ec, stop_id=9, pad_id=2)
  assert (cfg.length_penalty, cfg.early_stopping) == (0.5, "never")
  ec.method = "sample"
  assert commonsense_predict.decode_config(ec, 9, 2) == decode.SampleConfig(
    num_samples=5, max_new_tokens=20, top_p=0.9, top_k=0, temperature=1.0, stop_id=9, pad_id=2
  )
  assert commonsense_predict.generation_file_name(ec) == (
    "val_sample_1_num_5_top_k_0_top_p_0.9.json"
  )
  ec.method = "greedy"
  with pytest.raises(ValueError, match="evals.method must be 'sample' or 'beam', got 'greedy'"):
    commonsense_predict.decode_config(ec, 9, 2)


# ------------------------------------------------ vs Hugging Face transformers
torch = pytest.importorskip("torch")  # test extra; present in the venv
transformers = pytest.importorskip("transformers")
# Stop 48: hypotheses stop at varied lengths. Pad not 0: HF fills with
# `pad_token_id or eos_token_id`, i.e. eos for pad 0.
HF_V, HF_STOP, HF_PAD = 64, 48, 5


@pytest.fixture(scope="module")
def hf_tiny(tmp_path_factory):
  """A small random HF GPT-2 on disk, imported into ours."""
  torch.manual_seed(0)
  cfg = transformers.GPT2Config(
    n_layer=2,
    n_embd=32,
    n_head=4,
    vocab_size=HF_V,
    n_positions=32,
    bos_token_id=HF_PAD,
    eos_token_id=HF_STOP,
  )
  model = transformers.GPT2LMHeadModel(cfg).eval()
  with torch.no_grad():
    for p in model.parameters():
      p.copy_(0.3 * torch.randn_like(p))
  d = str(tmp_path_factory.mktemp("gpt2_beam"))
  model.save_pretrained(d)
  lm = gpt2.GPT2(**gpt2_import.read_hf_config(d), vocab_size=HF_V, dropout=0.0)
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))["params"]
  params = nn.meta.unbox(gpt2_import.load(shapes, os.path.join(d, "model.safetensors")))
  return model, lm, params


@pytest.mark.parametrize(
  "length_penalty,early_stopping",
  [
    (1.0, False),
    pytest.param(0.0, False, marks=_SLOW),
    pytest.param(2.0, "never", marks=_SLOW),
    pytest.param(-1.0, True, marks=_SLOW),
  ],
)
def test_equals_transformers_generate(hf_tiny, length_penalty, early_stopping):
  model, lm, params = hf_tiny
  k, t = 4, 8
  prompts = np.random.default_rng(5).integers(1, HF_V, (3, 6))
  with torch.no_grad():
    ids = torch.tensor(prompts)
    ref = model.generate(
      ids,
      attention_mask=torch.ones_like(ids),
      num_beams=k,
      num_return_sequences=k,
      do_sample=False,
      max_new_tokens=t,
      length_penalty=length_penalty,
      early_stopping=early_stopping,
      eos_token_id=HF_STOP,
      pad_token_id=HF_PAD,
      output_scores=True,
      return_dict_in_generate=True,
    )
  ref_seq = ref.sequences.numpy()[:, 6:].reshape(3, k, -1)
  ref_scores = ref.sequences_scores.numpy().reshape(3, k)
  cfg = beam.BeamConfig(
    num_beams=k,
    max_new_tokens=t,
    stop_id=HF_STOP,
    pad_id=HF_PAD,
    length_penalty=length_penalty,
    early_stopping=early_stopping,
  )
  toks, scores = beam.make_beam_fn(decode.LMDecoder(lm), cfg)(
    params, {"tokens": jnp.asarray(prompts)}
  )
  toks = np.asarray(toks)
  n = ref_seq.shape[-1]  # HF crops to the longest returned hypothesis
  np.testing.assert_array_equal(toks[..., :n], ref_seq)
  assert (toks[..., n:] == HF_PAD).all()
  np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)
  # Not vacuous: some hypotheses stop early, some run to max_new_tokens.
  stopped = (toks == HF_STOP).any(-1)
  assert stopped.any() and not stopped.all()
