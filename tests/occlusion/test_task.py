"""Task glue, prediction writer and a 2-step run of the real trainer on the
realoob dummy data (builder -> model -> trainer -> evaluator -> files)."""

import json
import os

import cv2
import numpy as np
import pytest

from relations import io_util
from relations.occlusion.data import realoob_io
from relations.occlusion.data.occlusion_boundaries import make_dummy_data
from relations.occlusion import evaluator as occlusion_predict
from relations.occlusion import task as occlusion
from relations.train import config_util


def _config(tmp_path, *overrides):
  return config_util.load_config(
    "configs/occlusion.py:tiny",
    [
      f"data.data_dir={tmp_path / 'tfds'}",
      f"data.manual_dir={make_dummy_data.HERE}",
      "input.crop_size=(32, 32)",
      "input.batch_size=8",
      "evals.test.nthresh=9",
      "evals.test.num_workers=1",
      *overrides,
    ],
  )


def test_gt_as_prediction_scores_one_and_files_are_official(tmp_path):
  config = _config(tmp_path)
  src = occlusion.make_builder(config).as_data_source("test")
  gts = {io_util.as_str(src[i]["id"]): src[i] for i in range(len(src))}

  def oracle(image):
    ex = next(e for e in gts.values() if np.array_equal(e["image"], image))
    return ex["boundaries"][0].astype(np.float32), ex["orientation"][0]

  out = tmp_path / "pred"
  res = occlusion_predict.predict_and_score(oracle, src, str(out), config.evals.test)
  assert res["num_images"] == 2
  assert res["B-ODS"] > 0.97 and res["O-ODS"] > 0.97
  for image_id, ex in gts.items():
    prob = cv2.imread(str(out / "boundaries" / f"{image_id}.png"), cv2.IMREAD_UNCHANGED)
    assert prob.dtype == np.uint16 and prob.shape == make_dummy_data.SIZE
    np.testing.assert_array_equal(prob == 65535, ex["boundaries"][0])
    theta = realoob_io.read_orientation(str(out / "orientation" / f"{image_id}.png"))
    b = ex["boundaries"][0]
    d = np.angle(np.exp(1j * (theta[b] - ex["orientation"][0][b])))
    assert np.abs(d).max() < 1e-4
    ov = cv2.imread(str(out / "overlay" / f"{image_id}.png"))
    assert ov.shape == make_dummy_data.SIZE + (3,)

  # Flipping every angle by pi keeps B and sends O precision to 0.
  flipped = occlusion_predict.predict_and_score(
    lambda im: (oracle(im)[0], oracle(im)[1] + np.pi),
    src,
    str(tmp_path / "flip"),
    config.evals.test,
  )
  assert flipped["B-ODS"] == pytest.approx(res["B-ODS"])
  assert flipped["O-ODS"] == 0.0

  # orient=false (boundary only): no orientation/ written, no O-metrics
  # (they would be scored against angle 0), B unchanged.
  b_only = occlusion_predict.predict_and_score(
    oracle, src, str(tmp_path / "b_only"), config.evals.test, with_orientation=False
  )
  assert b_only["B-ODS"] == pytest.approx(res["B-ODS"])
  assert not any(k.startswith("O-") for k in b_only)
  assert not (tmp_path / "b_only" / "orientation").exists()


def test_preprocess_and_loss_on_builder_examples(tmp_path, capsys):
  config = _config(tmp_path)
  src = occlusion.make_train_source(config)
  ex = occlusion.preprocess_train(src[0], np.random.default_rng(0), config)
  assert {k: v.shape for k, v in ex.items()} == {
    "image": (32, 32, 3),
    "boundary": (32, 32),
    "orientation": (32, 32),
    "valid": (32, 32),
    "mask": (32, 32),
  }
  assert ex["image"].dtype == np.float32
  assert set(np.unique(ex["valid"])) <= {0.0, 1.0}
  assert np.all(ex["boundary"][ex["valid"] > 0] == 1)
  # The 16x offline augmentation source (RealOOB's pool): 16 variants of
  # each of the 3 training images, the 1 hard negative once.
  with config.unlocked():
    config.data.offline_16x = True
  src16 = occlusion.make_train_source(config)
  assert len(src) == 4 and len(src16) == 3 * 16 + 1
  assert src16.summary()[:2] == (49, pytest.approx(1 / 49))
  hn = [i for i in range(len(src16)) if not np.asarray(src16[i]["sample"]["boundary"]).any()]
  assert len(hn) == 1  # the hard negative (no OB pixel) appears once
  ex16 = occlusion.preprocess_train(src16[5], np.random.default_rng(0), config)
  assert ex16["image"].shape == (32, 32, 3)
  # `prepare` prints the split's hard-negative share and the pool.
  from relations.datasets import prepare  # pylint: disable=g-import-not-at-top

  assert (
    prepare.main(
      [
        "occlusion_boundaries/realoob",
        "--manual_dir",
        make_dummy_data.HERE,
        "--data_dir",
        str(tmp_path / "tfds"),
      ]
    )
    == 0
  )
  out = capsys.readouterr().out
  assert "train split: 4 examples, 1 hard negatives (25.0 %)" in out
  assert (
    "training pool: 3 images x 16 + 1 hard negatives = 49 samples (2.0 % hard negatives)" in out
  )


@pytest.mark.slow
def test_trainer_two_steps_writes_and_scores_predictions(tmp_path):
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  config = _config(
    tmp_path, "total_steps=2", "checkpoint_every=2", "log_every=1", "evals.test.max_images=2"
  )
  result = trainer.train(config, str(tmp_path / "work"))
  assert result.step == 2
  for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
    assert 0.0 <= result.eval_metrics[f"test/{k}"] <= 1.0
  with open(tmp_path / "work" / "train_summary.json") as f:
    summary = json.load(f)
  assert summary["final_step"] == 2 and "test/B-ODS" in summary
  pred = tmp_path / "work" / "eval" / "test" / "step_2"
  ids = sorted(p[:-4] for p in os.listdir(pred / "boundaries"))
  assert ids == ["test_00000", "test_00001"]
  p = realoob_io.read_prediction(str(pred), ids[0])
  assert p["boundaries"].shape == make_dummy_data.SIZE  # native, cropped back
  assert p["orientation"].shape == make_dummy_data.SIZE
