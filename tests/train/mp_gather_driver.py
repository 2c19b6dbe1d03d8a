"""One process of the 2-process evaluation-gather test (tests/train/test_eval_gather.py).

Runs `eval_loop.finish` twice with per-process shard files: once into a folder both processes
share (the result is written to `<out>_<process>.json`), once into a folder of its own per process
(process 1's file is not where process 0 looks: both must fail, naming it, instead of hanging).
The device all-gather is replaced by a function that raises, so the items cannot go that way.
"""

import json
import os
import sys

from relations.train import distributed


def main(root, out):
  distributed.maybe_initialize(True)  # before any other JAX call
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from relations.train import eval_loop  # pylint: disable=g-import-not-at-top

  def no_allgather(blob):
    raise AssertionError("evaluation items went through the device all-gather")

  eval_loop._allgather_bytes = no_allgather  # pylint: disable=protected-access
  pi = jax.process_index()
  assert jax.process_count() == 2
  # 5 examples: process 0 holds 0, 2, 4 and process 1 holds 1, 3 (uneven shards).
  items = [
    (i, {"row": i, "pred": np.full(3, 10 * i, np.int64)}) for i in eval_loop.shard_indices(5)
  ]
  shared = os.path.join(root, "shared", ".gather")
  listed = []
  real_read = eval_loop._read_shards  # pylint: disable=protected-access

  def read(d):
    listed.append(sorted(os.listdir(d)))  # the files as process 0 finds them after the barrier
    return real_read(d)

  eval_loop._read_shards = read  # pylint: disable=protected-access

  def finalize(all_items):
    return {
      "indices": [i for i, _ in all_items],
      "preds": [it["pred"].tolist() for _, it in all_items],
    }

  result = eval_loop.finish(items, finalize, shard_dir=shared)
  record = {"result": result, "listed": listed, "left": os.path.exists(shared)}
  try:
    eval_loop.finish(items, finalize, shard_dir=os.path.join(root, f"own_{pi}"))
    record["error"] = None
  except Exception as e:  # noqa: BLE001  (the test reads its type and message)
    record["error"] = f"{type(e).__name__}: {e}"
  with open(f"{out}_{pi}.json", "w", encoding="utf-8") as f:
    json.dump(record, f)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
