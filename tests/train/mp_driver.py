"""One process of the 2-process loopback test: init jax.distributed first, train, dump params.

jax.distributed starts under `__main__` only: input worker processes import this module again
(multiprocessing spawn), and a second initialize with the same process id aborts the whole run.
"""

import sys

from relations.train import distributed


def main(workdir, total_steps, out, *overrides):
  distributed.maybe_initialize(True)  # before any other JAX call
  from absl import logging  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from relations.train import config_util, trainer  # pylint: disable=g-import-not-at-top

  logging.set_verbosity(logging.INFO)
  config = config_util.load_config(
    "tests/toy_task.py",
    [
      f"total_steps={total_steps}",
      "checkpoint_every=2",
      "mesh=[('data', -1), ('fsdp', 2)]",
      *overrides,
    ],
  )
  assert jax.process_count() == 2, jax.process_count()
  result = trainer.train(config, workdir)
  logging.warning(
    "process %d finished at step %d, preempted=%s",
    jax.process_index(),
    result.step,
    result.preempted,
  )
  params = multihost_utils.process_allgather(result.state["params"], tiled=True)
  flat = {
    jax.tree_util.keystr(p): np.asarray(x) for p, x in jax.tree_util.tree_leaves_with_path(params)
  }
  np.savez(out, step=result.step, **flat)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:])
