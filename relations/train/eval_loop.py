"""The sharded evaluation loop shared by every task's evaluator.

  items = eval_loop.predict_shard(n, load, predict, batch_size, emit)  # every process
  metrics = eval_loop.finish(items, finalize, shard_dir=...)           # every process

1. Shard: process p of P takes the examples p, p + P, p + 2P, ... of the split (`shard_indices`),
   so the shards differ in size by at most one example.
2. Predict: `load(i)` gives example i as fixed-shape numpy arrays; rows are stacked into local
   batches of `batch_size` (a multiple of the local device count), the last batch padded with
   copies of its first row and a mask, and `predict(batch)` runs on the process's own devices
   (a `Mesh` of `jax.local_devices()`, batch split over them: `local_mesh`, `jit_predict`). No
   collective runs inside the prediction, so processes with one batch more or less never wait on
   each other, and a row's result depends only on that row and the per-device batch shape, not
   on which process ran it. `emit(i, outputs)` turns a real row's outputs into a picklable item.
3. Gather: `finish` collects every process's items on process 0, sorted by example index, and
   calls `finalize(items)` there only: it writes the official file(s) once (atomically;
   relations.io_util) and scores them. With `shard_dir` (what the evaluators pass: a folder of
   their workdir, which every process of a run sees, as its checkpoints) each process writes its
   items to `shard_dir/items-<p>-of-<P>.pkl`, a barrier follows, and process 0 reads and removes
   the files: only process 0 ever holds every prediction, and nothing goes through the devices.
   Without it, the items are all-gathered through the devices (`gather_to_lead`: every process
   receives every process's items).
4. Broadcast: process 0's metric dict (or its error) is sent to every process
   (`broadcast_from_lead`), so logging and early stopping see the same values everywhere.

Parameters come from training as global arrays (possibly FSDP-sharded across processes);
`localize` makes a full, replicated copy on the local devices once per evaluation.

With one process no collective is used at all.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from relations import io_util
from relations.train import shm_transport, summaries

Load = Callable[[int], dict]
Emit = Callable[[int, Any], Any]


def process_info(
  process_index: int | None = None, process_count: int | None = None
) -> tuple[int, int]:
  pi = jax.process_index() if process_index is None else int(process_index)
  pc = jax.process_count() if process_count is None else int(process_count)
  return pi, pc


def shard_indices(
  n: int, process_index: int | None = None, process_count: int | None = None
) -> list[int]:
  """Example indices of this process: p, p + P, ... below n."""
  pi, pc = process_info(process_index, process_count)
  return list(range(pi, int(n), pc))


def local_mesh() -> Mesh:
  """A 1-axis ("data") mesh over this process's devices."""
  return Mesh(np.asarray(jax.local_devices()), ("data",))


def local_batch_size(requested: int, mesh: Mesh | None = None) -> int:
  """`requested` rounded up to a multiple of the local device count (at least one per device)."""
  d = (mesh or local_mesh()).size
  return max(d, -(-int(requested) // d) * d)


def localize(tree, mesh: Mesh | None = None):
  """A copy of `tree` replicated on the local devices of `mesh` (default `local_mesh()`).

  Leaves that are global arrays not fully held by this process (FSDP across hosts) are
  all-gathered, so every process must call this with the same tree (a collective).
  Replicated or host leaves are copied without communication.
  """
  mesh = mesh or local_mesh()
  repl = NamedSharding(mesh, P())

  def one(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      if x.is_fully_replicated:
        x = x.addressable_data(0)
      else:
        from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

        x = multihost_utils.process_allgather(x, tiled=True)
    return jax.device_put(x, repl)

  return jax.tree.map(one, tree)


def jit_predict(fn: Callable[..., Any], mesh: Mesh | None = None) -> Callable[..., Any]:
  """jit(fn(params, batch, *rest)) with params replicated and the batch split over `mesh`.

  Outputs are left where the partitioner puts them (they are pulled to the host per batch).
  """
  mesh = mesh or local_mesh()
  data = NamedSharding(mesh, P("data"))
  repl = NamedSharding(mesh, P())
  return jax.jit(fn, in_shardings=(repl, data))


def batches(indices: Sequence[int], batch_size: int) -> Iterable[tuple[list[int], np.ndarray]]:
  """(rows, mask) per batch: `batch_size` example indices, the last padded with its first row."""
  for s in range(0, len(indices), batch_size):
    idx = list(indices[s : s + batch_size])
    mask = np.zeros(batch_size, bool)
    mask[: len(idx)] = True
    idx += [idx[0]] * (batch_size - len(idx))
    yield idx, mask


def stack(rows: list[dict]) -> dict[str, np.ndarray]:
  """Stacks equally shaped example dicts (clear error naming the feature otherwise)."""
  hint = "evaluation inputs must have fixed shapes (or use `bucket`)"
  return {k: shm_transport.stack_feature(rows, k, hint=hint) for k in rows[0]}


def predict_shard(
  n: int,
  load: Load,
  predict: Callable[[dict], Any],
  batch_size: int,
  emit: Emit,
  *,
  bucket: Callable[[int, dict], Any] | None = None,
  mesh: Mesh | None = None,
  process_index: int | None = None,
  process_count: int | None = None,
) -> list[tuple[int, Any]]:
  """Predicts this process's shard; returns [(example index, emit(...))] for its real rows.

  Args:
    n: number of examples in the split.
    load: i -> dict of numpy arrays (one example, no batch dim).
    predict: batch dict (numpy, leading dim `batch_size`) -> pytree of arrays with a leading
      batch dim; typically `jit_predict`-ed with the batch put on `mesh` by this loop.
    batch_size: rows per call (rounded up to a multiple of the local device count).
    emit: (i, outputs of row i as numpy, batch dim removed) -> picklable item.
    bucket: optional (i, example) -> key; examples are batched only with examples of the
      same key (e.g. the padded image size), in index order within a key.
    mesh: the local mesh (default `local_mesh()`).
  """
  mesh = mesh or local_mesh()
  bs = local_batch_size(batch_size, mesh)
  data = NamedSharding(mesh, P("data"))
  mine = shard_indices(n, process_index, process_count)
  groups: dict[Any, list[int]] = {}
  cache: dict[int, dict] = {}
  if bucket is None:
    groups[None] = mine
  else:
    for i in mine:
      ex = load(i)
      cache[i] = ex
      groups.setdefault(bucket(i, ex), []).append(i)
  out = []
  for members in groups.values():
    for idx, mask in batches(members, bs):
      rows = [cache.pop(i) if i in cache else load(i) for i in idx[: int(mask.sum())]]
      rows += [rows[0]] * (bs - len(rows))
      batch = jax.device_put(stack(rows), data)
      with jax.set_mesh(mesh):  # not the caller's global (multi-process) mesh
        res = jax.device_get(predict(batch))
      for r, i in enumerate(idx):
        if mask[r]:
          out.append((i, emit(i, jax.tree.map(lambda x, r=r: np.asarray(x)[r], res))))
  out.sort(key=lambda t: t[0])
  return out


# ------------------------------------------------------------------ collectives
def _allgather_bytes(blob: bytes) -> list[bytes]:
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  lens = np.asarray(multihost_utils.process_allgather(np.array([len(blob)], np.int32)))
  lens = lens.reshape(-1)
  buf = np.zeros(max(1, int(lens.max())), np.uint8)
  buf[: len(blob)] = np.frombuffer(blob, np.uint8)
  every = np.asarray(multihost_utils.process_allgather(buf)).reshape(len(lens), -1)
  return [every[p, : lens[p]].tobytes() for p in range(len(lens))]


def gather_to_lead(items: list[tuple[int, Any]]) -> list[tuple[int, Any]] | None:
  """All processes' (index, item) lists merged and sorted by index on process 0; None elsewhere.

  A collective: every process calls it once per evaluation.
  """
  if jax.process_count() == 1:
    return sorted(items, key=lambda t: t[0])
  parts = _allgather_bytes(pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))
  if jax.process_index() != 0:
    return None
  merged = [t for part in parts for t in pickle.loads(part)]
  return sorted(merged, key=lambda t: t[0])


def broadcast_from_lead(obj: Any) -> Any:
  """Process 0's `obj` on every process (pickled; a collective)."""
  if jax.process_count() == 1:
    return obj
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if jax.process_index() == 0 else b""
  n = int(
    np.asarray(multihost_utils.broadcast_one_to_all(np.array([len(blob)], np.int32))).reshape(-1)[0]
  )
  buf = np.zeros(max(1, n), np.uint8)
  buf[: len(blob)] = np.frombuffer(blob, np.uint8)
  buf = np.asarray(multihost_utils.broadcast_one_to_all(buf))
  return pickle.loads(buf[:n].tobytes())


def shard_dir(eval_workdir: str) -> str:
  """The gather folder of an evaluator writing under `eval_workdir` (removed once merged)."""
  return os.path.join(eval_workdir, ".gather")


def _shard_path(shard_dir: str, process: int, count: int) -> str:
  return os.path.join(shard_dir, f"items-{process:05d}-of-{count:05d}.pkl")


def _write_shard(items: list[tuple[int, Any]], shard_dir: str) -> None:
  """This process's items, pickled, to its shard file (atomically: never read half-written)."""
  io_util.makedirs(shard_dir)
  path = _shard_path(shard_dir, jax.process_index(), jax.process_count())
  io_util.write_bytes_atomic(path, pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))


def _read_shards(shard_dir: str) -> list[tuple[int, Any]]:
  """Every process's shard file merged and sorted by index (process 0, after the barrier); the
  files are removed once read.

  Raises:
    FileNotFoundError: naming the missing file (a process that failed to write it, or a
      `shard_dir` that is not on storage every process sees).
  """
  count = jax.process_count()
  merged = []
  for p in range(count):
    path = _shard_path(shard_dir, p, count)
    try:
      blob = io_util.read_bytes(path)
    except FileNotFoundError:
      raise FileNotFoundError(
        f"{path}: evaluation items of process {p} are missing: it failed to write them (see its "
        "log), or this folder is not on storage every process sees (the workdir must be shared, "
        "e.g. NFS or gs://, as for checkpoints)"
      ) from None
    merged += pickle.loads(blob)
  for p in range(count):
    path = _shard_path(shard_dir, p, count)
    if io_util.is_url(path):
      io_util.epath(path).unlink()
    else:
      os.remove(path)
  if not io_util.is_url(shard_dir) and not os.listdir(shard_dir):
    os.rmdir(shard_dir)
  return sorted(merged, key=lambda t: t[0])


class LeadError(RuntimeError):
  """Raised on every process when process 0's `finalize` failed."""


def finish(
  items: list[tuple[int, Any]],
  finalize: Callable[[list[tuple[int, Any]]], dict],
  shard_dir: str | None = None,
) -> dict:
  """Gathers on process 0, runs `finalize(all items)` there, returns its dict everywhere.

  Args:
    items: this process's (example index, item) list.
    finalize: all items, sorted by index -> metric dict (process 0 only).
    shard_dir: with several processes, gather through per-process files in this folder (module
      docstring); None: all-gather through the devices.

  If gathering or `finalize` fails on process 0, the other processes raise `LeadError` with its
  message (instead of waiting forever for metrics), and process 0 re-raises the original error.
  A process that fails to write its shard file still joins the barrier (so process 0 reports the
  missing file rather than waiting), then raises its own error.
  """
  gathered, own_error = None, None
  if shard_dir is not None and jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    try:
      _write_shard(items, shard_dir)
    except Exception as e:  # noqa: BLE001  (re-raised after the barrier and the broadcast)
      own_error = e
    # One name everywhere: hosts may mount the shared folder under different paths.
    multihost_utils.sync_global_devices("eval_loop.finish: shard files written")
  else:
    gathered = gather_to_lead(items)
  result, error, media = None, None, None
  if jax.process_index() == 0:
    try:
      if gathered is None:
        gathered = _read_shards(shard_dir)
      result = finalize(gathered)
      if isinstance(result, dict) and summaries.MEDIA in result:
        # TensorBoard pictures stay on process 0 (the one that writes events): not broadcast.
        result = dict(result)
        media = result.pop(summaries.MEDIA)
    except Exception as e:  # noqa: BLE001  (re-raised below, after telling the others)
      error = e
  payload = broadcast_from_lead(
    {
      "ok": error is None,
      "result": result,
      "error": None if error is None else f"{type(error).__name__}: {error}",
    }
  )
  if error is not None:
    raise error
  if own_error is not None:
    raise own_error
  if not payload["ok"]:
    raise LeadError(f"evaluation failed on process 0: {payload['error']}")
  if media is not None:
    return {**payload["result"], summaries.MEDIA: media}
  return payload["result"]
