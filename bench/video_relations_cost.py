"""Cost per training step of a relation-tracker config, derived from the model.

  python bench/video_relations_cost.py --config configs/video_relations.py:paper

Lowers the real jitted loss + gradient (`relations.video_relations.task.loss_fn`)
on abstract inputs of the config's global batch (nothing is allocated or run),
reads XLA's FLOP count, and converts it into time per step and to train on a
TPU v4-32 (16 chips x 275 TFLOP/s bf16) and 8x H100 SXM (8 x 989 TFLOP/s
dense bf16) at an assumed model-FLOP utilisation (default 35%). The Adam
update (~10 FLOPs per parameter) is added. The host-side Hungarian
assignment (scipy, a few microseconds per frame) is not counted.
"""

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

from relations.video_relations import task as video_relations
from relations.train import config_util

PEAK = {"TPU v4-32 (16 chips)": 16 * 275e12, "8x H100 SXM": 8 * 989e12}


def abstract_batch(config):
  """ShapeDtypeStructs of one global batch, from a synthetic preprocess."""
  inp = config.input
  b, t = int(inp.batch_size), int(inp.clip_frames)
  m, p = int(inp.max_objects), int(inp.max_pairs)
  h, w = inp.image_size
  k = int(config.model.num_predicates)
  s = jax.ShapeDtypeStruct
  return {
    "frames": s((b, t, h, w, 3), jnp.uint8),
    "frame_valid": s((b, t), jnp.bool_),
    "frame_time": s((b, t), jnp.float32),
    "boxes": s((b, t, m, 4), jnp.float32),
    "box_valid": s((b, t, m), jnp.bool_),
    "labels": s((b, m), jnp.int32),
    "rel_boxes": s((b, t, m, 4), jnp.float32),
    "pairs": s((b, p, 2), jnp.int32),
    "pair_valid": s((b, p), jnp.bool_),
    "pair_labels": s((b, p, k), jnp.float32),
  }


def step_flops(config):
  """(FLOPs of one training step, number of parameters)."""
  model = video_relations.make_model(config)
  batch = abstract_batch(config)
  small = {k: np.zeros((1, *v.shape[1:]), v.dtype) for k, v in batch.items()}
  small["pairs"][..., 1] = 1
  params = jax.eval_shape(lambda r: video_relations.init_params(model, small, r), jax.random.key(0))
  n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
  grad = jax.grad(lambda p, b: video_relations.loss_fn(model, p, b, jax.random.key(0), config)[0])
  cost = jax.jit(grad).lower(params, batch).cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0]
  return float(cost["flops"]) + 10.0 * n_params, n_params


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--config", default="configs/video_relations.py:paper")
  ap.add_argument("--mfu", type=float, default=0.35)
  args, overrides = ap.parse_known_args(argv)
  config = config_util.load_config(args.config, [o.removeprefix("--config.") for o in overrides])
  flops, n_params = step_flops(config)
  steps = int(config.total_steps)
  frames = int(config.input.batch_size) * int(config.input.clip_frames)
  print(
    f"config {args.config}: {n_params / 1e6:.1f} M parameters, global "
    f"batch {config.input.batch_size} clips x {config.input.clip_frames} "
    f"frames = {frames} frames at {tuple(config.input.image_size)}"
  )
  print(
    f"FLOPs per training step (forward + backward + Adam): "
    f"{flops / 1e12:.2f} TFLOP ({flops / frames / 1e9:.1f} GFLOP/frame)"
  )
  for name, peak in PEAK.items():
    sec = flops / (peak * args.mfu)
    print(
      f"{name}: {sec * 1e3:.0f} ms/step at {args.mfu:.0%} MFU -> "
      f"{steps} steps in {sec * steps / 3600:.1f} h"
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
