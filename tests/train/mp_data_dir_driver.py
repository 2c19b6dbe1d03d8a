"""One of two loopback processes: `check_shared_data_dir` on a shared and a per-process directory.

argv: shared_dir per_process_root. Prints `shared ok` / `refused: <message>`.
"""

import sys

from relations.train import distributed


def main(shared, per_process_root):
  distributed.maybe_initialize(True)
  import jax  # pylint: disable=g-import-not-at-top

  from relations import tfds_util  # pylint: disable=g-import-not-at-top

  tfds_util.check_shared_data_dir(shared)
  print("shared ok", flush=True)
  # The same path naming a different disk on each node: here, a different directory.
  try:
    tfds_util.check_shared_data_dir(f"{per_process_root}/p{jax.process_index()}")
  except ValueError as e:
    print(f"refused: {e}", flush=True)


if __name__ == "__main__":
  main(*sys.argv[1:])
