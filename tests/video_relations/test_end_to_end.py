"""Synthetic VidOR -> TFDS -> trainer -> vrd_predict evaluator -> official
submission -> validator + `relations.evaluate video_relations`; plus exactness of the
frame mapping (ground-truth tracks reproduce the official GT: mAP 1)."""

import copy
import json
import os

import jax
import numpy as np
import pytest
from PIL import Image

from relations.video_relations.data import synthetic as synthetic_vidor
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import cli as vidor_cli
from relations.video_relations.metrics import io as vrd_io
from relations.video_relations.metrics import scoring
from relations.video_relations import task as video_relations
from relations.train import config_util
from relations.video_relations.inference import association
from relations.video_relations.inference import pipeline
from relations.video_relations.inference import prior_baseline
from relations.video_relations.inference import submission

CATS = vrd_categories.VIDOR_OBJECT_CATEGORIES
PREDS = vrd_categories.VIDOR_PREDICATES


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("rt")
  raw = str(root / "raw")
  synthetic_vidor.generate(raw, 4, 2, seed=3, min_frames=40, max_frames=56)
  config = config_util.load_config(
    "configs/video_relations.py:tiny",
    [
      f"data.data_dir={root / 'tfds'}",
      f"data.manual_dir={raw}",
      f"evals.val.groundtruth={os.path.join(raw, 'annotation', 'validation')}",
      "total_steps=2",
      "checkpoint_every=2",
      "log_every=1",
      "evals.val.gifs=1",
      # A smaller graph than `tiny` compiles faster; same code paths.
      "model.vit.depth=1",
      "model.det_layers=1",
      "input.image_size=(48, 64)",
      "model.num_queries=8",
    ],
  )
  builder = video_relations.make_builder(config)
  return root, raw, config, builder


def test_preprocess_train_targets(data):
  _, _, config, builder = data
  ex = builder.as_data_source("train")[0]
  a = video_relations.preprocess_train(ex, np.random.default_rng(5), config)
  b = video_relations.preprocess_train(ex, np.random.default_rng(5), config)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])  # deterministic given rng
  t, m = config.input.clip_frames, config.input.max_objects
  assert a["frames"].shape == (t, 48, 64, 3)
  assert a["frames"].dtype == np.uint8  # normalised on device (loss_fn)
  assert a["boxes"].shape == (t, m, 4) and a["pairs"].shape == (config.input.max_pairs, 2)
  nb = a["boxes"][a["box_valid"]]
  assert (nb >= 0).all() and (nb <= 1).all() and (nb[:, 2:] > nb[:, :2]).all()
  pv = a["pair_valid"]
  assert pv.any()
  for (s, o), lab, ok in zip(a["pairs"], a["pair_labels"], pv):
    if ok:
      assert s != o and (a["box_valid"][:, s] & a["box_valid"][:, o]).any()
    else:
      assert not lab.any()


def test_train_source_decodes_only_kept_frames_to_the_same_clip(data):
  _, _, config, builder = data
  full = builder.as_data_source("train")
  lazy = video_relations.make_train_source(config)
  assert len(lazy) == len(full)
  for i in range(len(full)):
    stored = lazy[i]["frames"]
    assert all(isinstance(f, bytes) for f in stored)  # nothing decoded yet
    a = video_relations.preprocess_train(full[i], np.random.default_rng(i), config)
    b = video_relations.preprocess_train(lazy[i], np.random.default_rng(i), config)
    assert a.keys() == b.keys()
    for k in a:
      np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_uint8_frames_normalise_on_device_like_the_host(data):
  _, _, config, builder = data
  ex = builder.as_data_source("train")[0]
  a = video_relations.preprocess_train(ex, np.random.default_rng(1), config)
  batch = {k: v[None] for k, v in a.items()}
  batch["frame_valid"][0, -1] = False  # one padded frame -> zeros
  got = np.asarray(jax.jit(video_relations._model_frames)(batch))
  want = a["frames"].astype(np.float32) / 127.5 - 1.0
  want[-1] = 0.0
  # XLA multiplies by 1 / 127.5 where numpy divides: at most one float32 ulp apart.
  np.testing.assert_allclose(got[0], want, rtol=0, atol=1.2e-7)
  np.testing.assert_array_equal(got[0, -1], 0.0)
  assert got.min() >= -1 and got.max() <= 1


def test_flip_mirrors_frames_and_boxes(data):
  _, _, config, builder = data
  ex = builder.as_data_source("train")[1]
  plain, flipped = copy.deepcopy(config), copy.deepcopy(config)
  plain.input.flip_prob = 0.0
  flipped.input.flip_prob = 1.0
  a = video_relations.preprocess_train(ex, np.random.default_rng(7), plain)
  b = video_relations.preprocess_train(ex, np.random.default_rng(7), flipped)
  np.testing.assert_array_equal(b["frames"], a["frames"][:, :, ::-1])
  v = a["box_valid"]
  np.testing.assert_allclose(b["boxes"][v][:, [0, 2]], 1 - a["boxes"][v][:, [2, 0]], atol=1e-6)
  np.testing.assert_array_equal(b["boxes"][v][:, [1, 3]], a["boxes"][v][:, [1, 3]])
  for k in ("pairs", "pair_labels", "pair_valid", "labels", "box_valid"):
    np.testing.assert_array_equal(a[k], b[k])


def test_relation_labels_rule():
  rel = {
    "subject": [0, 0, 1],
    "object": [1, 1, 0],
    "predicate": [3, 4, 5],
    "begin_fid": [0, 10, 0],
    "end_fid": [20, 13, 5],
  }
  lab = video_relations.relation_labels(rel, {0: 1, 1: 0}, 8, 20, 6, 3)
  # [0, 20) covers the segment [8, 20) -> on; [10, 13) lies inside -> on;
  # [0, 5) does not overlap -> off.
  assert lab[1, 0, 3] == 1 and lab[1, 0, 4] == 1 and lab.sum() == 2
  lab = video_relations.relation_labels(rel, {0: 1, 1: 0}, 14, 26, 6, 3)
  # [0, 20) overlaps [14, 26) by 6 >= 12 / 2 -> on; [10, 13): 0 -> off.
  assert lab[1, 0, 3] == 1 and lab.sum() == 1


def test_groundtruth_tracks_reproduce_the_official_groundtruth(data):
  _, raw, _, builder = data
  ds = builder.as_data_source("validation")
  gt = vrd_io.load_groundtruth(os.path.join(raw, "annotation", "validation"))
  pred = {}
  for i in range(len(ds)):
    ex = ds[i]
    vid = ex["video_id"].decode() if isinstance(ex["video_id"], bytes) else ex["video_id"]
    tracks = {tr.track_id: tr for tr in pipeline.groundtruth_tracks(ex)}
    rels = []
    r = ex["relations"]
    for s, o, p, b, e in zip(
      r["subject"], r["object"], r["predicate"], r["begin_fid"], r["end_fid"]
    ):
      a, c = tracks[int(s)], tracks[int(o)]
      rels.append(
        association.Relation(
          (CATS[a.category], PREDS[p], CATS[c.category]),
          int(b),
          int(e),
          a.native_boxes[b - a.start : e - a.start],
          c.native_boxes[b - c.start : e - c.start],
          [1.0],
        )
      )
    pred[vid] = [submission.relation_to_json(x) for x in rels]
  res = scoring.evaluate(gt, pred, "helper").as_dict()
  assert res["mAP"] == 1.0 and res["R@100"] == 1.0


def test_prior_baseline_ranks_by_training_frequency():
  c, p = CATS.index, PREDS.index
  ex = {
    "tracks": {"category": np.array([c("adult"), c("dog")])},
    "relations": {
      "subject": [0, 0, 0, 1],
      "object": [1, 1, 1, 0],
      "predicate": [p("chase"), p("chase"), p("towards"), p("away")],
    },
  }
  counts = prior_baseline.triplet_counts([ex], CATS, PREDS)
  assert counts[("adult", "dog")].most_common() == [("chase", 2), ("towards", 1)]
  assert counts[("dog", "adult")] == {"away": 1}


def test_train_predict_write_validate_score(data):
  root, raw, config, _ = data
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  res = trainer.train(config, str(root / "train"))
  ev = res.eval_metrics
  for mode in ("groundtruth", "detected", "prior"):
    for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10"):
      assert 0.0 <= ev[f"val/{mode}/{k}"] <= 1.0
    assert ev[f"val/{mode}/validator_warnings"] == 0
  assert 0.0 <= ev["val/detected/AP50"] <= 1.0
  assert ev["val/detected/num_gt"] > 0
  out = root / "train" / "eval" / "val"
  gif_dir = out / "gif_detected"
  gifs = os.listdir(gif_dir)
  assert len(gifs) == 1
  with Image.open(gif_dir / gifs[0]) as im:
    assert im.n_frames > 5
  sub = out / "submission_groundtruth_step2.json"
  with open(sub) as f:
    s = json.load(f)
  assert s["version"] == "VERSION 1.0" and len(s["results"]) == 2
  for rels in s["results"].values():
    assert len(rels) <= 200
    assert [r["score"] for r in rels] == sorted([r["score"] for r in rels], reverse=True)
  metrics_json = root / "cli.json"
  rc = vidor_cli.main(
    [
      "--groundtruth",
      os.path.join(raw, "annotation", "validation"),
      "--prediction",
      str(sub),
      "--protocol",
      "vru20",
      "--output",
      str(metrics_json),
    ]
  )
  assert rc == 0
  with open(metrics_json) as f:
    cli = json.load(f)
  for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10"):
    assert cli[k] == pytest.approx(ev[f"val/groundtruth/{k}"], abs=0)
