"""Optimizer and learning-rate schedule from config.

Config:
  config.schedule = dict(lr=1e-3, warmup_steps=100, decay="cosine" | "linear" | "constant",
                         end_factor=0.0)
  config.optax = dict(name="adamw" | "sgd", b1=0.9, b2=0.999, weight_decay=1e-4,
                      wd_mask=r"(kernel|embedding)$", clip_norm=1.0, momentum=0.9)
Weight decay applies only to leaves whose '/'-joined path matches `wd_mask` (kernels and embedding
tables by default; biases, LayerNorm scales and position embeddings are left alone).
"""

from __future__ import annotations

import re

import jax
import optax

from relations.train import sharding


def make_schedule(cfg, total_steps: int) -> optax.Schedule:
  lr = float(cfg.lr)
  warmup = int(cfg.get("warmup_steps", 0))
  decay = cfg.get("decay", "cosine")
  end = lr * float(cfg.get("end_factor", 0.0))
  rest = max(total_steps - warmup, 1)
  if decay == "cosine":
    main = optax.cosine_decay_schedule(lr, rest, alpha=end / lr if lr else 0.0)
  elif decay == "linear":
    main = optax.linear_schedule(lr, end, rest)
  elif decay == "constant":
    main = optax.constant_schedule(lr)
  else:
    raise ValueError(f"config.schedule.decay: unknown {decay!r} (cosine, linear, constant)")
  if warmup <= 0:
    return main
  return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), main], [warmup])


def make_optimizer(config) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """Returns (tx, schedule) for `config.optax` / `config.schedule` / `config.total_steps`."""
  cfg = config.optax
  schedule = make_schedule(config.schedule, int(config.total_steps))
  wd_re = re.compile(cfg.get("wd_mask", r"(kernel|embedding)$"))
  mask_fn = lambda params: jax.tree.map(
    lambda p: bool(wd_re.search(p)), sharding.tree_paths(params)
  )
  name = cfg.get("name", "adamw")
  if name == "adamw":
    core = optax.adamw(
      schedule,
      b1=cfg.get("b1", 0.9),
      b2=cfg.get("b2", 0.999),
      weight_decay=cfg.get("weight_decay", 0.0),
      mask=mask_fn,
    )
  elif name == "sgd":
    core = optax.chain(
      optax.add_decayed_weights(cfg.get("weight_decay", 0.0), mask_fn),
      optax.sgd(schedule, momentum=cfg.get("momentum", 0.9)),
    )
  else:
    raise ValueError(f"config.optax.name: unknown optimizer {name!r} (adamw, sgd)")
  parts = []
  if cfg.get("clip_norm", None):
    parts.append(optax.clip_by_global_norm(float(cfg.clip_norm)))
  parts.append(core)
  return optax.chain(*parts), schedule
