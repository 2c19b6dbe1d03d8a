"""A config with ablation rows for the sweep tests (tests/test_sweep.py): the toy task of
tests/toy_task.py for one step, no evaluation. `heads=3` does not divide the width: that row
fails when the model is built, after its config has loaded."""

import ml_collections

from relations.train import config_util

HYPERS = {
  "pair": ("lr=0.003", "lr=0.001"),
  "fail_then_ok": ("heads=3", "lr=0.001"),
}


def get_hyper(arg=None):
  name = arg or "pair"
  if name not in HYPERS:
    raise ValueError(f"Unknown hyper {name!r}; available: {', '.join(HYPERS)}")
  return list(HYPERS[name])


def describe_row(row):
  return {"Row": f"toy {row}"}


def get_config(arg=None):
  arg = config_util.parse_arg(arg, lr=3e-3, heads=2)
  c = ml_collections.ConfigDict()
  c.task = "tests.toy_task"
  c.seed = 0
  c.total_steps = 1
  c.input = dict(batch_size=16, num_examples=64, size=16, num_threads=0)
  c.model = dict(
    width=32, depth=1, mlp_dim=64, num_heads=arg.heads, patch_size=4, posemb_grid=(4, 4)
  )
  c.mesh = [("data", -1), ("fsdp", 1)]
  c.partition_rules = [(".*", "fsdp")]
  c.fsdp_min_size = 256
  c.optax = dict(name="adamw", weight_decay=1e-4, clip_norm=1.0)
  c.schedule = dict(lr=arg.lr, warmup_steps=0, decay="constant")
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.log_every = 1
  c.async_checkpoints = False
  c.evals = {}
  c.init_head_bias = None
  return c
