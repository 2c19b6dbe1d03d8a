"""Command-line parsing shared by `python -m relations.train` and `python -m relations.predict`.

`--config configs/x.py:arg` plus any number of `--config.field=value` overrides (checked against the
locked config, so a misspelled field fails and names itself).
"""

from __future__ import annotations

import argparse
from typing import Sequence


def parse(argv: Sequence[str], description: str, extra=None):
  """Returns (args, overrides). `extra(parser)` may add more flags."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--config", required=True, help="configs/x.py[:arg]")
  parser.add_argument("--workdir", required=True, help="checkpoints, logs and outputs go here")
  parser.add_argument("--distributed", action="store_true",
                      help="call jax.distributed.initialize() first (or RELATIONS_JAX_INIT=1)")
  if extra:
    extra(parser)
  args, rest = parser.parse_known_args(list(argv))
  overrides, unknown = [], []
  i = 0
  while i < len(rest):
    a = rest[i]
    if a.startswith("--config."):
      if "=" not in a:  # `--config.x value`
        if i + 1 >= len(rest):
          parser.error(f"{a} needs a value")
        a = f"{a}={rest[i + 1]}"
        i += 1
      overrides.append(a[len("--config."):])
    else:
      unknown.append(a)
    i += 1
  if unknown:
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")
  return args, overrides
