"""The trainer block every config shares: mesh, partition rules, optimizer, schedule, checkpoints.

Config files import it as `import common` (`relations.train.config_util` puts this folder on the
import path while it loads a config).
"""


def trainer(
  c,
  *,
  total_steps,
  lr,
  warmup_steps,
  decay,
  weight_decay,
  clip_norm,
  checkpoint_every,
  log_every,
  keep_checkpoints=2,
):
  """Sets the fields the trainer reads on ConfigDict `c` (steps, lr in optimizer units).

  The mesh is data-parallel over every device with an `fsdp` axis of 1; raise `fsdp` (e.g.
  `--config.mesh="[('data', -1), ('fsdp', 4)]"`) to shard parameters and optimizer state over
  it: every parameter carries the `fsdp` rule.
  """
  c.total_steps = total_steps
  c.mesh = [("data", -1), ("fsdp", 1)]
  c.partition_rules = [(".*", "fsdp")]
  c.optax = dict(name="adamw", weight_decay=weight_decay, clip_norm=clip_norm)
  c.schedule = dict(lr=lr, warmup_steps=warmup_steps, decay=decay)
  c.checkpoint_every = checkpoint_every
  c.keep_checkpoints = keep_checkpoints
  c.log_every = log_every
