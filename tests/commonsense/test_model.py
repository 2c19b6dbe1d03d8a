"""Visual slots, RoI-Align, masking, loss and cached decoding of the VL model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.commonsense.generation import beam
from relations.commonsense.generation import decode
from relations.commonsense import gpt2
from relations.commonsense import losses
from relations.commonsense import model as vl_generator
from tests.commonsense.random_params import random_params

V, L, K, EOS = 60, 16, 4, 3


def _batch(b=2, visual="features"):
  rng = np.random.default_rng(0)
  ids = rng.integers(10, V, (b, L)).astype(np.int32)
  ids[:, 1 : 1 + K] = EOS  # slot positions hold eos ids
  ids[:, 10:12] = EOS  # padding inside the sequence
  labels = np.full((b, L), -1, np.int32)
  labels[:, 12:] = ids[:, 12:]
  slot_mask = np.zeros((b, K), bool)
  slot_mask[0, :3] = True
  slot_mask[1, :2] = True
  batch = {
    "input_ids": ids,
    "labels": labels,
    "token_mask": ids != EOS,
    "slot_mask": slot_mask,
    "slot_person_ids": np.array([[50, 52, 0, 0], [50, 51, 0, 0]], np.int32),
  }
  if visual == "features":
    batch["visual_features"] = rng.normal(size=(b, K, 12)).astype(np.float32)
  else:
    batch["image"] = rng.uniform(-1, 1, (b, 16, 16, 3)).astype(np.float32)
    batch["boxes"] = np.tile(
      np.array([[0, 0, 1, 1], [0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1], [0, 0, 1, 1]], np.float32),
      (b, 1, 1),
    )
  return jax.tree.map(jnp.asarray, batch)


def _model(**kw):
  lm = dict(vocab_size=V, num_layers=2, width=32, num_heads=4, max_len=32, dropout=0.0)
  kw.setdefault("visual_dropout", 0.0)
  return vl_generator.VLGenerator(lm=lm, num_slots=K, **kw)


def _init(model, batch):
  return jax.tree.map(jnp.asarray, random_params(model, batch))


def _fn(model, method=None):
  """Jitted `model.apply({"params": p}, *args, method=method)` (eager calls of
  a transformer dispatch op by op and cost seconds each on CPU)."""
  return jax.jit(lambda p, *a: model.apply({"params": p}, *a, method=method))


def test_slots_overwrite_image_positions_with_pg_and_subject():
  batch = _batch()
  model = _model()
  params = _init(model, batch)
  emb, mask = _fn(model, vl_generator.VLGenerator.input_embeddings)(params, batch)
  wte = params["lm"]["wte"]["embedding"]
  proj = _fn(model, lambda m, f: m.project(f, False))(params, batch["visual_features"])
  subj = params["subject_embed"][0]
  # Row 0: slots 0..2 filled, slot 3 keeps wte(eos).
  for k in range(3):
    want = proj[0, k] + wte[batch["slot_person_ids"][0, k]] + subj
    np.testing.assert_allclose(emb[0, 1 + k], want, atol=1e-5)
  np.testing.assert_allclose(emb[0, 4], wte[EOS], atol=1e-6)
  np.testing.assert_allclose(emb[0, 0], wte[batch["input_ids"][0, 0]])
  np.testing.assert_array_equal(mask[0, 1 : 1 + K], [True, True, True, False])
  np.testing.assert_array_equal(mask[1, 1 : 1 + K], [True, True, False, False])
  assert not mask[0, 10] and mask[0, 12]
  # Without PG the detection embedding is not added.
  nopg = _model(person_grounding=False)
  emb2, _ = _fn(nopg, vl_generator.VLGenerator.input_embeddings)(params, batch)
  np.testing.assert_allclose(emb2[0, 2], proj[0, 1] + subj, atol=1e-5)


def test_attention_mask_switch_hides_or_attends_padding():
  batch = _batch()
  changed = dict(batch)
  changed["input_ids"] = batch["input_ids"].at[:, 10:12].set(7)
  for masked in (True, False):
    model = _model(attention_mask=masked)
    params = _init(model, batch)
    forward = _fn(model)
    a, _ = forward(params, batch)
    b, _ = forward(params, changed)
    diff = float(jnp.abs(a[:, 12:] - b[:, 12:]).max())
    if masked:
      assert diff < 1e-5  # token_mask (from the original ids) hides 10..11
    else:
      assert diff > 1e-3  # official behaviour: padding is attended


def test_text_only_model_has_no_visual_params_and_ignores_slots():
  batch = _batch()
  model = _model(visual="none")
  params = _init(model, batch)
  assert set(params) == {"lm"}
  emb, mask = _fn(model, vl_generator.VLGenerator.input_embeddings)(params, batch)
  np.testing.assert_allclose(
    emb[:, 1 : 1 + K],
    params["lm"]["wte"]["embedding"][EOS][None, None] * jnp.ones((2, K, 1)),
    atol=1e-6,
  )
  assert not bool(mask[:, 1 : 1 + K].any())


def test_lm_loss_and_sequence_scores_on_known_values():
  logits = jnp.log(jnp.array([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]]]))
  labels = jnp.array([[-1, 0, 1]])  # pos 0 predicts 0 (p .5), pos 1 -> 1 (.8)
  loss, m = losses.lm_loss(logits, labels)
  want = (np.log(2) - np.log(0.8)) / 2
  np.testing.assert_allclose(loss, want, rtol=1e-6)
  assert float(m["num_tokens"]) == 2
  np.testing.assert_allclose(m["token_accuracy"], 1.0)
  s, n = losses.sequence_scores(logits, labels)
  np.testing.assert_allclose(s, [np.log(2) - np.log(0.8)], rtol=1e-6)
  assert int(n[0]) == 2


@pytest.mark.parametrize("masked", [True, False])
def test_cached_greedy_decoding_matches_full_forward(masked):
  batch = _batch()
  model = _model(attention_mask=masked)
  params = _init(model, batch)
  prompt_len, steps = 12, 4
  cfg = decode.SampleConfig(
    num_samples=2, max_new_tokens=steps, temperature=0.0, stop_id=-1, pad_id=0
  )
  fn = decode.make_sample_fn(vl_generator.VLDecoder(model, prompt_len), cfg, prompt_len=prompt_len)
  out = np.asarray(fn(params, batch, jax.random.PRNGKey(0)))
  assert out.shape == (2, 2, steps)
  # Reference: uncached full forward passes on the growing sequence (the
  # sequence has room: L = 16 = prompt 12 + 4).
  ids = np.asarray(batch["input_ids"]).copy()
  tmask = np.asarray(batch["token_mask"]).copy()
  forward = _fn(model)
  for t in range(steps):
    cur = dict(batch, input_ids=jnp.asarray(ids), token_mask=jnp.asarray(tmask))
    logits, _ = forward(params, cur)
    nxt = np.asarray(logits[:, prompt_len - 1 + t].argmax(-1))
    ids[:, prompt_len + t] = nxt
    tmask[:, prompt_len + t] = True
  for s in range(2):
    np.testing.assert_array_equal(out[:, s], ids[:, prompt_len:])


def test_beam_scores_equal_full_forward_log_probs_of_the_hypotheses():
  # Each returned hypothesis' score must be its log-probability under the
  # uncached model: wrong cache reordering or key masks would break this.
  batch = _batch()
  model = _model(attention_mask=True)
  params = _init(model, batch)
  prompt_len, steps, k, stop = 12, 4, 3, 7
  cfg = beam.BeamConfig(
    num_beams=k,
    max_new_tokens=steps,
    stop_id=stop,
    pad_id=0,
    length_penalty=1.0,
    early_stopping="never",
  )
  toks, scores = beam.make_beam_fn(vl_generator.VLDecoder(model, prompt_len), cfg, prompt_len)(
    params, batch
  )
  toks, scores = np.asarray(toks), np.asarray(scores)
  assert toks.shape == (2, k, steps)
  forward = _fn(model)
  for j in range(k):
    ids = np.asarray(batch["input_ids"]).copy()
    ids[:, prompt_len:] = toks[:, j]
    tmask = np.asarray(batch["token_mask"]).copy()
    tmask[:, prompt_len:] = True
    logits, _ = forward(
      params, dict(batch, input_ids=jnp.asarray(ids), token_mask=jnp.asarray(tmask))
    )
    logp = np.asarray(jax.nn.log_softmax(logits, -1))
    for b in range(2):
      row = toks[b, j].tolist()
      n = row.index(stop) + 1 if stop in row else steps
      want = sum(logp[b, prompt_len - 1 + t, row[t]] for t in range(n)) / n
      np.testing.assert_allclose(scores[b, j], want, rtol=1e-5, atol=1e-5)
  assert (np.diff(scores, axis=1) <= 0).all()  # best first
  assert len({tuple(r) for r in toks[0]}) == k  # distinct hypotheses


def test_vit_slots_train_the_vit():
  batch = _batch(visual="vit")
  model = _model(
    visual="vit",
    vit=dict(width=16, depth=1, mlp_dim=32, num_heads=2, patch_size=4, posemb_grid=(4, 4)),
  )
  params = _init(model, batch)
  assert "vit" in params

  def loss(p):
    logits, _ = model.apply({"params": p}, batch)
    return losses.lm_loss(logits, batch["labels"])[0]

  @jax.jit
  def grads_and_embeddings(p):
    return jax.grad(loss)(p), model.apply(
      {"params": p}, batch, method=vl_generator.VLGenerator.input_embeddings
    )

  grads, (emb, _) = grads_and_embeddings(params)
  g = grads["vit"]["embedding"]["kernel"]
  assert float(jnp.abs(g).max()) > 0
  # Slot 1 and slot 2 cover different image halves -> different features.
  assert float(jnp.abs(emb[0, 2] - emb[0, 3]).max()) > 1e-4


def test_unknown_visual_kind_is_an_error():
  with pytest.raises(ValueError, match="visual must be"):
    _init(_model(visual="resnet"), _batch())


def test_model_factory_uses_gpt2_sizes():
  m = vl_generator.Model(lm_variant="small", lm=dict(vocab_size=100))
  assert m.lm["width"] == 768 and m.lm["num_layers"] == 12
  assert gpt2.SIZES["small"] == (12, 768, 12)


@pytest.mark.parametrize("masked", [True, False])
def test_acc50_shared_prompt_scores_equal_per_candidate_forward(masked):
  # G = 2 queries x C = 5 candidates: each candidate is its query's prompt
  # (positions < 10) followed by its own relation token, inference and
  # padding. The shared-prompt path runs the prompt once per query; the
  # reference runs every full candidate sequence through the teacher-forced
  # forward pass (the loss's) and `sequence_scores`.
  g, c, rel = 2, 5, 10
  base = _batch(g)
  model = _model(attention_mask=masked)
  params = _init(model, base)
  rng = np.random.default_rng(7)
  cont = rng.integers(10, V, (g, c, L - rel)).astype(np.int32)
  for gi in range(g):
    for ci in range(c):
      n = 2 + (gi * c + ci) % 4  # inference lengths 2..5
      cont[gi, ci, 1 + n :] = EOS  # padding after the inference
  labels = np.full((g, c, L - rel), -1, np.int32)
  for gi in range(g):
    for ci in range(c):
      keep = cont[gi, ci] != EOS
      keep[0] = False  # the relation token: no label
      labels[gi, ci][keep] = cont[gi, ci][keep]
  batch = dict(
    base,
    cand_ids=jnp.asarray(cont),
    cand_labels=jnp.asarray(labels),
    cand_mask=jnp.asarray(cont != EOS),
  )
  score = jax.jit(
    lambda p, b: model.apply(
      {"params": p}, b, rel, c, method=vl_generator.VLGenerator.continuation_scores
    )
  )
  nll, n = score(params, batch)
  # Only the scored positions through the vocabulary projection: the same scores. Query 1 has
  # 4 real candidates (the 5th is batch padding: score 0, as no position of it is scored).
  real = [c, c - 1]
  pos = [vl_generator.continuation_score_positions(labels[q], real[q], step=8) for q in range(g)]
  k = max(len(p) for p in pos)  # the evaluator batches queries of one K; pad here
  pos = [np.concatenate([p, np.full(k - len(p), -1, np.int32)]) for p in pos]
  assert k % 8 == 0 and (pos[1] >= 0).sum() < k <= c * (L - rel - 1)
  nll_k, n_k = score(params, dict(batch, cand_score_pos=jnp.asarray(np.stack(pos))))
  forward = _fn(model)
  ids = np.repeat(np.asarray(base["input_ids"]), c, 0)
  ids[:, rel:] = cont.reshape(g * c, -1)
  full = jax.tree.map(lambda x: jnp.repeat(x, c, 0), base)
  full.update(input_ids=jnp.asarray(ids), token_mask=jnp.asarray(ids != EOS))
  lab = np.full((g * c, L), -1, np.int32)
  lab[:, rel:] = labels.reshape(g * c, -1)
  logits, _ = forward(params, full)
  want_nll, want_n = vl_generator.sequence_scores(logits, jnp.asarray(lab))
  np.testing.assert_array_equal(np.asarray(n).reshape(-1), want_n)
  np.testing.assert_allclose(np.asarray(nll).reshape(-1), want_nll, rtol=1e-5, atol=1e-5)
  assert len(set(np.round(np.asarray(want_nll), 4))) > 5  # not degenerate
  keep = np.ones((g, c), bool)
  keep[1, c - 1] = False
  np.testing.assert_array_equal(np.asarray(n_k)[keep], np.asarray(want_n).reshape(g, c)[keep])
  np.testing.assert_allclose(
    np.asarray(nll_k)[keep], np.asarray(want_nll).reshape(g, c)[keep], rtol=1e-5, atol=1e-5
  )
  assert float(nll_k[1, c - 1]) == 0.0 and int(n_k[1, c - 1]) == 0


def test_continuation_score_positions():
  # 3 candidates x width 5; labels at positions 1..n of each (unshifted): position t is scored
  # when labels[c, t + 1] is set. Candidate 2 is padding (num_real = 2).
  labels = np.full((3, 5), -1, np.int32)
  labels[0, 1:3] = 7  # scored from t = 0, 1
  labels[1, 1:5] = 9  # t = 0..3
  labels[2, 1:4] = 5
  pos = vl_generator.continuation_score_positions(labels, 2, step=4)
  np.testing.assert_array_equal(pos, [0, 1, 5, 6, 7, 8, -1, -1])
  # K never exceeds C * (W - 1), whatever the step.
  assert len(vl_generator.continuation_score_positions(labels, 3, step=64)) == 12
