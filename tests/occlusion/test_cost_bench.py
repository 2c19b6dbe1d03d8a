"""bench/occlusion_cost.py: Table 3's params and inference GFLOPs, on the tiny config."""

import importlib.util
import os

import jax
import numpy as np

from relations.occlusion import task as occlusion
from relations.train import config_util

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "occlusion_cost.py")


def _bench():
  spec = importlib.util.spec_from_file_location("occlusion_cost", _PATH)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def test_inference_cost_params_and_flops_scale_with_pixels():
  bench = _bench()
  config = config_util.load_config("configs/occlusion.py:tiny")
  n, f = bench.inference_cost(config, 128, 96)
  model = occlusion.make_model(config)
  params = jax.eval_shape(
    lambda: occlusion.init_params(
      model, {"image": np.zeros((1, 96, 128, 3), np.float32)}, jax.random.key(0)
    )
  )
  assert n == sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
  # 100 x 90 pads to 104 x 96 (patch 8): the same cost as 104 x 96.
  assert bench.inference_cost(config, 100, 90)[1] == bench.inference_cost(config, 104, 96)[1]
  # Twice the pixels: convs scale linearly, attention faster.
  f2 = bench.inference_cost(config, 256, 96)[1]
  assert 1.9 * f < f2 < 3 * f
