"""Compute dtype and rematerialisation settings of a config (mixed precision).

Every config has `compute_dtype` (config_util.TRAINER_DEFAULTS): "auto" is bfloat16 when the
default JAX backend is an accelerator (GPU, TPU) and float32 on the CPU (XLA:CPU runs bfloat16
matmuls emulated and slower, and CPU tests compare exact values); "bfloat16" / "float32" force it.
Parameters and the optimizer state stay float32 whatever the compute dtype: models cast their
inputs and matmul operands to it (flax `dtype=`, `param_dtype` float32) and return logits,
boxes and losses in float32.

`remat` (bool) makes the transformer stacks (the shared ViT, GPT-2) recompute each block's
activations in the backward pass: less activation memory for one more forward pass of the blocks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32, "float16": jnp.float16}
ACCELERATORS = ("gpu", "tpu", "cuda", "rocm")


def resolve_dtype(name: str, backend: str | None = None):
  """ "auto" | "bfloat16" | "float32" | "float16" -> a jnp dtype ("auto" by `backend`)."""
  name = str(name)
  if name == "auto":
    backend = backend or jax.default_backend()
    return jnp.bfloat16 if backend.lower() in ACCELERATORS else jnp.float32
  if name not in DTYPES:
    raise ValueError(
      f"config field 'compute_dtype': expected auto, {', '.join(DTYPES)}; got {name!r}"
    )
  return DTYPES[name]


def compute_dtype(config):
  """The compute dtype of `config` (its `compute_dtype` field; float32 when absent)."""
  return resolve_dtype(config.get("compute_dtype", "float32"))


def remat(config) -> bool:
  """Whether `config` rematerialises its transformer blocks (its `remat` field)."""
  return bool(config.get("remat", False))
