"""Orbax checkpoints of the train state, restored onto the current mesh's shardings.

A checkpoint holds `state` ({"params", "opt", "step"}) and `meta` (JSON: the step and the input
pipeline position). The input pipeline is a pure function of (seed, step), so its position is the
step itself; it is stored explicitly so a restore can check that the data order matches.
Saves are atomic (orbax writes `<step>.orbax-checkpoint-tmp` and renames), so a run killed mid-save
resumes from the previous complete step. Every save records checksums of its files and every
restore checks them first (`checkpoint_integrity`); a resume skips damaged checkpoints and continues
from the newest intact one (`restore_newest_intact`).
"""

from __future__ import annotations

from etils import epath
import jax
import orbax.checkpoint as ocp

from relations import io_util
from relations.train import checkpoint_integrity as integrity


def make_manager(workdir: str, *, keep: int, async_save: bool = True) -> ocp.CheckpointManager:
  """The manager of `<workdir>/checkpoints`; `workdir` may be a URL (gs://...), kept as one."""
  directory = io_util.epath(io_util.local_abspath(workdir)) / "checkpoints"
  # Process 0 records the checksums (every process's files are complete by then).
  recorder = integrity.Recorder(directory, enabled=jax.process_index() == 0)
  manager = ocp.CheckpointManager(
    directory,
    options=ocp.CheckpointManagerOptions(
      max_to_keep=keep,
      enable_async_checkpointing=async_save,
      cleanup_tmp_directories=True,
      create=True,
      async_options=ocp.AsyncOptions(post_finalization_callback=recorder) if async_save else None,
    ),
    item_names=("state", "meta"),
  )
  manager.relations_recorder = recorder
  manager.relations_async = async_save
  return manager


def save(manager: ocp.CheckpointManager, step: int, state, meta: dict, *, force=False) -> None:
  recorder = getattr(manager, "relations_recorder", None)
  if recorder is not None:
    recorder.pending.append(step)
  saved = manager.save(
    step,
    args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
    force=force,
  )
  if recorder is not None:
    if not saved and step in recorder.pending:
      recorder.pending.remove(step)
    elif saved and not manager.relations_async:
      recorder()  # a synchronous save has committed: record now


def restore_newest_intact(manager: ocp.CheckpointManager, abstract_state, say=integrity.warn):
  """(state, meta, step) from the newest intact checkpoint; None when there is no checkpoint.

  Checkpoints are tried newest first. A damaged one (`checkpoint_integrity.verify`; or one with no
  recorded checksums that orbax cannot read) is reported and skipped; once an older one is
  restored, the damaged newer ones are moved to `<workdir>/damaged_checkpoints/` (kept for
  inspection, out of the way of the next saves). An intact checkpoint that does not fit
  `abstract_state` (another model config) is an error, never skipped.

  Raises:
    integrity.CheckpointDamagedError: every checkpoint is damaged (all named).
  """
  directory = epath.Path(manager.directory)
  damaged = []
  for step in sorted(manager.all_steps(), reverse=True):
    step_dir = directory / str(step)
    try:
      verified = integrity.verify(step_dir, step)
      try:
        state, meta = restore(manager, step, abstract_state)
      except Exception as e:  # pylint: disable=broad-except
        if verified:
          raise
        raise integrity.CheckpointDamagedError(
          step, step_dir, f"unreadable and no checksums recorded ({type(e).__name__}: {e})"
        ) from None
    except integrity.CheckpointDamagedError as e:
      say(f"{e}; trying the previous checkpoint")
      damaged.append(e)
      continue
    if not verified:
      say(f"{step_dir}: no checksums recorded for this checkpoint; restored unverified")
    if damaged:
      _move_aside(manager, [e.step for e in damaged])
      say(
        f"resumed from step {step}, the newest intact checkpoint; the damaged "
        f"{'ones were' if len(damaged) > 1 else 'one was'} moved to "
        f"{directory.parent / 'damaged_checkpoints'}"
      )
    return state, meta, step
  if damaged:
    newest, older = damaged[0], damaged[1:]
    raise integrity.CheckpointDamagedError(
      newest.step,
      newest.path,
      newest.reason
      + "".join(f"; step {e.step} too: {e.path}: {e.reason}" for e in older)
      + "; no intact checkpoint to resume from (move the workdir aside to start afresh)",
    )
  return None


def _move_aside(manager: ocp.CheckpointManager, steps) -> None:
  """Moves step folders to `<workdir>/damaged_checkpoints/` (process 0), then reloads `manager`."""
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  directory = epath.Path(manager.directory)
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("relations_checkpoint_verified")
  if jax.process_index() == 0:
    dest_dir = directory.parent / "damaged_checkpoints"
    dest_dir.mkdir(parents=True, exist_ok=True)
    for step in steps:
      dest = dest_dir / str(step)
      n = 1
      while dest.exists():
        dest, n = dest_dir / f"{step}.{n}", n + 1
      (directory / str(step)).rename(dest)
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("relations_checkpoint_moved")
  manager.reload()


def restore(manager: ocp.CheckpointManager, step: int, abstract_state):
  """Restores (state, meta) at `step` onto the shardings carried by `abstract_state`."""
  restored = manager.restore(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()
    ),
  )
  return restored["state"], restored["meta"]


def abstract_of(state_shapes, shardings):
  """ShapeDtypeStructs that carry the target shardings (orbax restores into them)."""
  return jax.tree.map(
    lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), state_shapes, shardings
  )


# Step folders checked against their checksums in this process (`read_shapes` then
# `restore_params` read the same checkpoint: hashing a large one twice would double its I/O).
_verified: set[str] = set()


def _verify_once(step_path) -> bool:
  """`integrity.verify` of `step_path` unless this process already verified it."""
  key = str(step_path)
  if key in _verified:
    return True
  step = int(step_path.name) if step_path.name.isdigit() else -1
  ok = integrity.verify(step_path, step)
  if ok:
    _verified.add(key)
  return ok


def _check_metadata_file(state_dir) -> None:
  """Raises CheckpointDamagedError naming `state/_METADATA` when it is not readable JSON.

  Orbax reads a damaged metadata file as "no metadata" (a warning), which reads like the wrong
  kind of checkpoint; the file itself is what is wrong.
  """
  import json  # pylint: disable=g-import-not-at-top

  path = epath.Path(state_dir) / "_METADATA"
  step_name = epath.Path(state_dir).parent.name
  step = int(step_name) if step_name.isdigit() else -1
  if not path.exists():
    raise integrity.CheckpointDamagedError(step, path, "metadata file missing")
  try:
    json.loads(path.read_bytes().decode("utf-8"))
  except (UnicodeDecodeError, ValueError) as e:
    raise integrity.CheckpointDamagedError(
      step, path, f"unreadable metadata file (not JSON: {e})"
    ) from None


def read_shapes(state_dir: str) -> dict:
  """The saved state's tree of ShapeDtypeStructs, from the checkpoint's metadata (no data read).

  The checkpoint's recorded checksums are checked first, so a damaged metadata file is named.

  Args:
    state_dir: `<workdir>/checkpoints/<step>/state`.

  Raises:
    integrity.CheckpointDamagedError: a file of the checkpoint (its metadata included) is
      missing or damaged (names the file).
    ValueError: a readable checkpoint that is not a train state.
  """
  _verify_once(epath.Path(state_dir).parent)
  meta = ocp.PyTreeCheckpointer().metadata(state_dir)
  tree = getattr(meta, "item_metadata", meta)
  tree = getattr(tree, "tree", tree)
  if not isinstance(tree, dict) or "params" not in tree:
    _check_metadata_file(state_dir)  # unverified checkpoints: name a damaged metadata file
    raise ValueError(f"{state_dir}: not a train-state checkpoint (no 'params' in its metadata)")
  return jax.tree.map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), tree)


def restore_params(state_dir: str, abstract_params):
  """Restores only `params` of a saved state onto the shardings carried by `abstract_params`.

  The optimizer state is not read (evaluation needs the parameters only). The checkpoint's
  recorded checksums are checked first.

  Raises:
    integrity.CheckpointDamagedError: a file of the checkpoint is missing or damaged.
  """
  step_path = epath.Path(state_dir).parent
  if not _verify_once(step_path):
    integrity.warn(f"{step_path}: no checksums recorded for this checkpoint; restored unverified")
  item = {"params": abstract_params}
  restore_args = jax.tree.map(lambda x: ocp.ArrayRestoreArgs(sharding=x.sharding), item)
  restored = ocp.PyTreeCheckpointer().restore(
    state_dir,
    args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True),
  )
  return restored["params"]
