"""Orbax checkpoints of the train state, restored onto the current mesh's shardings.

A checkpoint holds `state` ({"params", "opt", "step"}) and `meta` (JSON: the step and the input
pipeline position). The input pipeline is a pure function of (seed, step), so its position is the
step itself; it is stored explicitly so a restore can check that the data order matches.
Saves are atomic (orbax writes `<step>.orbax-checkpoint-tmp` and renames), so a run killed mid-save
resumes from the previous complete step.
"""

from __future__ import annotations

import jax
import orbax.checkpoint as ocp

from relations import io_util


def make_manager(workdir: str, *, keep: int, async_save: bool = True) -> ocp.CheckpointManager:
  """The manager of `<workdir>/checkpoints`; `workdir` may be a URL (gs://...), kept as one."""
  return ocp.CheckpointManager(
    io_util.epath(io_util.local_abspath(workdir)) / "checkpoints",
    options=ocp.CheckpointManagerOptions(
      max_to_keep=keep,
      enable_async_checkpointing=async_save,
      cleanup_tmp_directories=True,
      create=True,
    ),
    item_names=("state", "meta"),
  )


def save(manager: ocp.CheckpointManager, step: int, state, meta: dict, *, force=False) -> None:
  manager.save(
    step,
    args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
    force=force,
  )


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


def read_shapes(state_dir: str) -> dict:
  """The saved state's tree of ShapeDtypeStructs, from the checkpoint's metadata (no data read).

  Args:
    state_dir: `<workdir>/checkpoints/<step>/state`.
  """
  meta = ocp.PyTreeCheckpointer().metadata(state_dir)
  tree = getattr(meta, "item_metadata", meta)
  tree = getattr(tree, "tree", tree)
  if not isinstance(tree, dict) or "params" not in tree:
    raise ValueError(f"{state_dir}: not a train-state checkpoint (no 'params' in its metadata)")
  return jax.tree.map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), tree)


def restore_params(state_dir: str, abstract_params):
  """Restores only `params` of a saved state onto the shardings carried by `abstract_params`.

  The optimizer state is not read (evaluation needs the parameters only).
  """
  item = {"params": abstract_params}
  restore_args = jax.tree.map(lambda x: ocp.ArrayRestoreArgs(sharding=x.sharding), item)
  restored = ocp.PyTreeCheckpointer().restore(
    state_dir,
    args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True),
  )
  return restored["params"]
