"""`python -m relations.train --config configs/x.py:tiny --workdir W [--config.a.b=v ...]`."""

import sys

from relations import cli_errors
from relations.train import cli
from relations.train import distributed
from relations.train import startup_stop


@cli_errors.entry_point
def main(argv=None) -> int:
  args, overrides = cli.parse(
    argv, "Train any relations config with the shared trainer.", prog="relations.train"
  )
  # Everything is checked before the first side effect (jax.distributed, the workdir,
  # config.json, a dataset build).
  cli_errors.check_output_dir(args.workdir)
  config = cli.load_checked_config(args.config, overrides)
  # Before any other JAX call: it fixes the backend and the set of global devices.
  distributed.maybe_initialize(args.distributed)
  from absl import logging  # pylint: disable=g-import-not-at-top
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  logging.set_verbosity(logging.INFO)
  try:
    result = trainer.train(config, args.workdir)
  except startup_stop.Stopped:
    return 143  # its one line is printed; 128 + SIGTERM, as a preempted run (requeued)
  print(
    f"finished at step {result.step} ({result.steps_per_sec:.2f} steps/s"
    f"{', preempted' if result.preempted else ''})"
  )
  return 143 if result.preempted else 0


if __name__ == "__main__":
  sys.exit(main())
