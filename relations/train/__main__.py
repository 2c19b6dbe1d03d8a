"""`python -m relations.train --config configs/x.py:tiny --workdir W [--config.a.b=v ...]`."""

import sys

from relations.train import cli
from relations.train import distributed


def main(argv=None) -> int:
  args, overrides = cli.parse(sys.argv[1:] if argv is None else argv,
                              "Train any relations config with the shared trainer.")
  # Before any other JAX call: it fixes the backend and the set of global devices.
  distributed.maybe_initialize(args.distributed)
  from absl import logging  # pylint: disable=g-import-not-at-top
  from relations.train import config_util, trainer# pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.INFO)
  config = config_util.load_config(args.config, overrides)
  result = trainer.train(config, args.workdir)
  print(f"finished at step {result.step} ({result.steps_per_sec:.2f} steps/s"
        f"{', preempted' if result.preempted else ''})")
  return 143 if result.preempted else 0


if __name__ == "__main__":
  sys.exit(main())
