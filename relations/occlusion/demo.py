"""Demo: synthetic RealOOB-layout data -> TFDS -> tiny model -> official predictions -> scores.

`run_demo(workdir)` is this task's part of the README demo (`python -m relations.demo`).
"""

import json
import os
import time

import numpy as np

from relations.occlusion.task import make_builder


def _demo_config(root):
  """The tiny config pointed at `root`/data (synthetic) and `root`/tfds."""
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  return config_util.load_config(
    "configs/occlusion.py:tiny",
    [
      f"data.manual_dir={os.path.join(root, 'data')}",
      f"data.data_dir={os.path.join(root, 'tfds')}",
    ],
  )


def canny_baseline(config, workdir, low=50, high=100, seed=0):
  """Scores a binary Canny edge map with uniformly random orientation.

  Writes predictions like the model's (`<workdir>/boundaries`, ...), then
  scores them with the same evaluator; returns its metrics.
  """
  import cv2  # pylint: disable=g-import-not-at-top
  from relations.occlusion import evaluator as occlusion_predict  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(seed)

  def predict(image):
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    prob = (cv2.Canny(gray, low, high) > 0).astype(np.float32)
    theta = rng.uniform(-np.pi, np.pi, prob.shape).astype(np.float32)
    return prob, theta

  ev_cfg = config.evals.test
  return occlusion_predict.predict_and_score(
    predict, make_builder(config).as_data_source(ev_cfg.split), workdir, ev_cfg
  )


def run_demo(workdir):
  """Synthetic RealOOB-layout data -> TFDS -> tiny model -> predictions.

  Returns:
    dict of headline metrics: the model's B-/O-ODS/OIS/AP on the synthetic
    test split, Canny's (random orientation) by the same evaluator, and the
    wall-clock seconds of each stage.
  """
  from relations.occlusion.data import synthetic as synthetic_occlusion  # pylint: disable=g-import-not-at-top
  from relations.train import trainer  # pylint: disable=g-import-not-at-top
  from relations import console  # pylint: disable=g-import-not-at-top

  t0 = time.perf_counter()
  workdir = os.path.abspath(workdir)
  config = _demo_config(workdir)
  d = config.demo
  with console.stage("synthetic RealOOB-layout data", prefix="[occlusion]"):
    synthetic_occlusion.write_dataset(
      config.data.manual_dir,
      d.num_train,
      d.num_test,
      d.num_hard_negatives,
      seed=config.seed,
      size=tuple(d.size),
    )
  make_builder(config)
  t_data = time.perf_counter() - t0
  with console.stage(f"train tiny ({config.total_steps} steps) + evaluate", prefix="[occlusion]"):
    result = trainer.train(config, os.path.join(workdir, "train"))
  t_train = time.perf_counter() - t0 - t_data
  model_m = {k.split("/", 1)[1]: v for k, v in result.eval_metrics.items() if k.startswith("test/")}
  with console.stage("Canny baseline, same evaluator", prefix="[occlusion]"):
    canny = canny_baseline(config, os.path.join(workdir, "canny"))
  out = {
    "model": {
      k: model_m[k] for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP") if k in model_m
    },
    "canny": {k: canny[k] for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP")},
    "predictions": os.path.join(workdir, "train", "eval", "test", f"step_{result.step}"),
    "seconds": {"data": t_data, "train_and_eval": t_train, "total": time.perf_counter() - t0},
    "steps_per_sec": result.steps_per_sec,
  }
  with open(os.path.join(workdir, "demo_metrics.json"), "w") as f:
    json.dump(out, f, indent=2)
  return out
