"""Jitted numeric pieces: boxes / GIoU, Hungarian matching, set losses,
RoI align, geometry and motion features, the model's shapes."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.video_relations.model import detection_head
from relations.video_relations.model import relation_head
from relations.video_relations.model import relation_tracker as relation_tracker
from relations.video_relations import boxes as box_lib
from relations.video_relations.model import losses as det_loss
from relations.video_relations.model import matching


def test_giou_known_values():
  a = jnp.array([[0.0, 0.0, 2.0, 2.0]])
  b = jnp.array([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 2.0], [3.0, 0.0, 4.0, 1.0]])
  iou, giou = box_lib.pairwise_iou_giou(a, b)
  np.testing.assert_allclose(iou[0], [1 / 7, 1, 0], atol=1e-6)
  # Hulls: 9, 4, 8 -> giou = iou - (hull - union) / hull.
  np.testing.assert_allclose(giou[0], [1 / 7 - 2 / 9, 1, 0 - 3 / 8], atol=1e-6)
  np.testing.assert_allclose(box_lib.elementwise_giou(a, b[:1]), giou[0, :1], atol=1e-6)
  c = box_lib.cxcywh_to_xyxy(jnp.array([0.5, 0.5, 0.2, 0.4]))
  np.testing.assert_allclose(c, [0.4, 0.3, 0.6, 0.7], atol=1e-7)
  np.testing.assert_allclose(box_lib.xyxy_to_cxcywh(c), [0.5, 0.5, 0.2, 0.4], atol=1e-7)


def test_assignment_is_optimal_against_brute_force():
  rng = np.random.default_rng(0)
  cost = rng.normal(size=(20, 5, 3)).astype(np.float32)  # [frames, queries, targets]
  valid = rng.random((20, 3)) < 0.7
  got = np.asarray(matching.assign(np.swapaxes(cost, 1, 2), valid))
  for i in range(20):
    cols = np.flatnonzero(valid[i])
    assert (got[i][~valid[i]] == -1).all()
    best = min(
      sum(cost[i, q, c] for q, c in zip(perm, cols))
      for perm in itertools.permutations(range(5), len(cols))
    )
    assert sum(cost[i, got[i, c], c] for c in cols) == pytest.approx(best)
    assert len(set(got[i][cols])) == len(cols)


def test_jitted_match_and_loss_on_perfect_predictions():
  tgt = jnp.array([[[0.3, 0.3, 0.2, 0.2], [0.7, 0.6, 0.1, 0.3], [0.5, 0.5, 0.1, 0.1]]])
  labels = jnp.array([[2, 0, 1]])
  valid = jnp.array([[True, True, False]])
  # Queries 3 and 1 hold the two objects; the others are far away.
  boxes = jnp.array([[[0.9, 0.9, 0.05, 0.05], tgt[0, 1], [0.1, 0.9, 0.05, 0.05], tgt[0, 0]]])
  logits = jnp.full((1, 4, 4), -10.0).at[0, 3, 2].set(10.0).at[0, 1, 0].set(10.0)
  logits = logits.at[0, 0, 3].set(10.0).at[0, 2, 3].set(10.0)
  loss, m, match = jax.jit(det_loss.detection_loss)(logits, boxes, labels, tgt, valid)
  np.testing.assert_array_equal(match, [[3, 1, -1]])
  assert float(m["l1"]) == pytest.approx(0, abs=1e-6)
  # GIoU carries the eps of its denominators: 1 - a / (a + 1e-7) per box.
  eps_term = np.mean([1 - a / (a + 1e-7) for a in (0.04, 0.03)])
  assert float(m["giou"]) == pytest.approx(eps_term, rel=0.05)
  assert float(m["class"]) < 1e-4 and float(loss) < 1e-3
  # A wrong class on a matched query is penalised.
  bad = logits.at[0, 3, 2].set(-10.0).at[0, 3, 0].set(10.0)
  assert float(det_loss.detection_loss(bad, boxes, labels, tgt, valid)[1]["class"]) > 4.0


def test_embedding_loss_prefers_consistent_identities():
  match = jnp.array([[[0, 1], [0, 1]]])  # [B=1, T=2, M=2]
  valid = jnp.ones((1, 2, 2), bool)
  e = jnp.eye(2)[None, None].repeat(2, 1)  # query q -> e_q in both frames
  good = det_loss.embedding_loss(e, match, valid, jnp.arange(2))
  swapped = det_loss.embedding_loss(e, jnp.array([[[0, 1], [1, 0]]]), valid, jnp.arange(2))
  # Each anchor sees 3 others: cosine 1 (temperature 0.1 -> logit 10) for
  # the same embedding, 0 for two others. Consistent: the positive has the 10
  # -> log(1 + 2 e^-10); swapped: the positive has a 0 -> 10 + log(1 + 2e^-10).
  # float32 resolution near 10 is ~1e-6 (the difference of two ~10 values).
  assert float(good) == pytest.approx(np.log1p(2 * np.exp(-10)), abs=2e-6)
  assert float(swapped) == pytest.approx(10 + np.log1p(2 * np.exp(-10)), rel=1e-5)


def test_predicate_loss_masks_pairs():
  logits = jnp.array([[0.0, 0.0], [5.0, -5.0]])
  labels = jnp.array([[1, 0], [1, 0]])
  got = det_loss.predicate_loss(logits, labels, jnp.array([True, False]))
  assert float(got) == pytest.approx(2 * np.log(2), rel=1e-6)


def test_motion_features_signs():
  # Subject moves right towards a static object on its right.
  s = jnp.array([[[0.1, 0.4, 0.2, 0.5], [0.3, 0.4, 0.4, 0.5]]])
  o = jnp.array([[[0.7, 0.4, 0.8, 0.5], [0.7, 0.4, 0.8, 0.5]]])
  mask = jnp.ones((1, 2), bool)
  times = jnp.array([[0.0, 0.5]])
  f = relation_head.motion_features(s, o, mask, times)
  np.testing.assert_allclose(f[0, :2], [0.4, 0.0], atol=1e-6)  # vs / segment
  assert float(f[0, 6]) == pytest.approx(-0.4, abs=1e-6)  # distance shrinks
  assert float(f[0, 7]) == pytest.approx(0.4, abs=1e-6)  # approach speed
  # One visible frame: no motion at all.
  f1 = relation_head.motion_features(s, o, jnp.array([[True, False]]), times)
  np.testing.assert_array_equal(f1, 0)
  # Denser sampling of the same motion gives the same features.
  s3 = jnp.array([[[0.1, 0.4, 0.2, 0.5], [0.2, 0.4, 0.3, 0.5], [0.3, 0.4, 0.4, 0.5]]])
  o3 = jnp.concatenate([o, o[:, :1]], 1)
  f3 = relation_head.motion_features(s3, o3, jnp.ones((1, 3), bool), jnp.array([[0.0, 0.25, 0.5]]))
  np.testing.assert_allclose(f3, f, atol=1e-6)


def test_model_shapes():
  model = relation_tracker.Model(
    num_classes=5,
    num_predicates=7,
    vit=dict(width=16, depth=1, mlp_dim=32, num_heads=2, patch_size=8, posemb_grid=(2, 3)),
    num_queries=4,
    det_layers=2,
    det_heads=2,
    det_mlp_dim=32,
    emb_dim=8,
    rel_hidden=16,
  )
  b, t, p = 2, 3, 4
  frames = jax.random.uniform(jax.random.key(0), (b, t, 16, 24, 3))
  fi = jnp.broadcast_to(jnp.arange(t), (b, p, t))
  sb = jnp.broadcast_to(jnp.array([0.1, 0.1, 0.4, 0.5]), (b, p, t, 4))
  mask = jnp.ones((b, p, t), bool)
  cat = jax.nn.one_hot(jnp.zeros((b, p), int), 5)
  args = (frames, fi, fi / 4.0, sb, sb, mask, cat, cat)
  # One compilation each is much cheaper than op-by-op dispatch.
  params = jax.jit(model.init)(jax.random.key(1), *args)
  logits, det = jax.jit(model.apply)(params, *args)
  assert logits.shape == (b, p, 7)
  assert det["logits"].shape == (b * t, 4, 6)
  assert det["boxes"].shape == (b * t, 4, 4)
  assert det["query_index"].shape == (b * t, 4)
  assert len(det["aux"]) == 2 and det["aux"][0][0].shape == (b * t, 6, 6)
  np.testing.assert_allclose(jnp.linalg.norm(det["embeddings"], axis=-1), 1, atol=1e-5)


def test_pixel_refiner_starts_at_identity_and_applies_relative_deltas():
  frames = jax.random.uniform(jax.random.key(0), (2, 16, 24, 3))
  boxes = jnp.array([[[0.5, 0.5, 0.2, 0.3], [0.3, 0.6, 0.1, 0.1]]] * 2)
  feats = jnp.ones((2, 2, 8))
  ref = detection_head.PixelRefiner(size=8)
  params = jax.jit(ref.init)(jax.random.key(1), frames, boxes, feats)
  apply = jax.jit(ref.apply)  # one compilation for the four calls below
  # The delta layer starts at zero: refinement is the identity.
  np.testing.assert_allclose(apply(params, frames, boxes, feats), boxes, atol=1e-7)
  # A bias (dx, dy, dw, dh) = (0.5, -1, log 2, 0) moves the centre by half a
  # width / minus one height and doubles the width.
  p = jax.tree.map(lambda x: x, params)
  p["params"]["delta"]["bias"] = jnp.array([0.5, -1.0, np.log(2.0), 0.0])
  out = apply(p, frames, boxes, feats)
  np.testing.assert_allclose(out[0, 0], [0.6, 0.2, 0.4, 0.3], rtol=1e-6)
  np.testing.assert_allclose(out[0, 1], [0.35, 0.5, 0.2, 0.1], rtol=1e-6)
  # The crop follows the box: the delta depends on the pixels under it.
  p["params"]["delta"]["kernel"] = jax.random.normal(
    jax.random.key(2), p["params"]["delta"]["kernel"].shape
  )
  a = apply(p, frames, boxes, feats)
  b = apply(p, frames.at[:, :8, 8:16].set(1.0), boxes, feats)
  assert float(jnp.abs(a - b)[:, 0].max()) > 1e-4


@pytest.mark.parametrize("iters", [1, 2])
def test_model_with_pixel_refinement_adds_auxiliary_outputs(iters):
  model = relation_tracker.Model(
    num_classes=5,
    num_predicates=7,
    vit=dict(width=16, depth=1, mlp_dim=32, num_heads=2, patch_size=8, posemb_grid=(2, 3)),
    num_queries=4,
    det_layers=2,
    det_heads=2,
    det_mlp_dim=32,
    emb_dim=8,
    rel_hidden=16,
    refine_size=8,
    refine_iters=iters,
  )
  frames = jax.random.uniform(jax.random.key(0), (3, 16, 24, 3))
  params = jax.jit(lambda r, x: model.init(r, x, method=model.encode_detect))(
    jax.random.key(1), frames
  )
  _, det = jax.jit(lambda p, x: model.apply(p, x, method=model.encode_detect))(params, frames)
  names = {k for k in params["params"]["detector"] if "refine" in k}
  expected = {"pixel_refine", "pixel_refine_1"} if iters == 2 else {"pixel_refine"}
  assert names == expected
  # proposals + decoder layer 0 + decoder layer 1 + all but the last
  # refinement are auxiliary outputs.
  assert len(det["aux"]) == 2 + iters
  # Zero-initialised deltas: the refined boxes equal the last decoder layer's.
  np.testing.assert_allclose(det["boxes"], det["aux"][-1][1], atol=1e-6)


def test_motion_switch_of_the_relation_head():
  t, p = 3, 2
  # The same features in every frame: reordering boxes in time only permutes
  # the per-frame features, so only the motion features see the difference.
  grid = jnp.broadcast_to(jax.random.normal(jax.random.key(0), (1, 3, 4, 8)), (t, 3, 4, 8))
  fi = jnp.broadcast_to(jnp.arange(t), (p, t))
  sb = jnp.broadcast_to(jnp.array([0.1, 0.1, 0.4, 0.5]), (p, t, 4))
  sb = sb.at[..., 1].add(jnp.arange(t) * 0.05)
  ob = sb.at[..., 0].add(jnp.arange(t) * 0.1 + 0.2)
  mask = jnp.ones((p, t), bool)
  cat = jax.nn.one_hot(jnp.zeros(p, int), 5)
  diffs = []
  for motion in (True, False):
    head = relation_head.RelationHead(num_predicates=7, hidden=16, use_motion=motion)
    params = jax.jit(head.init)(jax.random.key(1), grid, fi, fi / 4.0, sb, ob, mask, cat, cat)
    apply = jax.jit(head.apply)  # one compilation for both calls, not op-by-op dispatch
    fwd = apply(params, grid, fi, fi / 4.0, sb, ob, mask, cat, cat)
    rev = apply(params, grid, fi, fi / 4.0, sb[:, ::-1], ob[:, ::-1], mask, cat, cat)
    diffs.append(float(jnp.abs(rev - fwd).max()))
  assert diffs[0] > 1e-4
  assert diffs[1] == pytest.approx(0, abs=1e-6)
