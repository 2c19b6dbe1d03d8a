"""Device mesh from config and regex partition rules for parameters and optimizer state.

Config:
  config.mesh = [("data", -1), ("fsdp", 1)]       # axis name, size (-1: all remaining devices)
  config.partition_rules = [(regex, tactic), ...]  # first match on the '/'-joined leaf path wins
  config.fsdp_min_size = 2**12                     # leaves smaller than this stay replicated

A tactic is "replicate", "fsdp" (shard the largest dimension divisible by the fsdp axis size along
"fsdp"; replicate when none is) or an explicit tuple of axis names / None per dimension. Paths of
optimizer-state leaves contain the parameter path (e.g. `opt/1/0/mu/Transformer/...`), so one rule
list serves both.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

BATCH_AXES = ("data", "fsdp")


def make_mesh(axes: Sequence[tuple[str, int]], devices=None) -> Mesh:
  """Builds a Mesh over all (global) devices; one size may be -1 (the rest)."""
  devices = list(jax.devices() if devices is None else devices)
  names = [a for a, _ in axes]
  sizes = [int(s) for _, s in axes]
  if sizes.count(-1) > 1:
    raise ValueError(f"config.mesh {axes}: at most one axis may have size -1")
  known = int(np.prod([s for s in sizes if s != -1]))
  if len(devices) % known:
    raise ValueError(f"config.mesh {axes}: {len(devices)} devices do not divide into {known}")
  sizes = [len(devices) // known if s == -1 else s for s in sizes]
  if int(np.prod(sizes)) != len(devices):
    raise ValueError(f"config.mesh {axes} -> {sizes} does not use all {len(devices)} devices")
  try:
    grid = mesh_utils.create_device_mesh(sizes, devices)
  except (AssertionError, ValueError, NotImplementedError):
    grid = np.asarray(devices).reshape(sizes)
  return Mesh(grid, names)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over every batch axis present in the mesh."""
  axes = tuple(a for a in BATCH_AXES if a in mesh.axis_names)
  return NamedSharding(mesh, P(axes))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def tree_paths(tree) -> Any:
  """A tree of the same structure whose leaves are '/'-joined key paths."""

  def name(path):
    parts = []
    for k in path:
      for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
          parts.append(str(getattr(k, attr)))
          break
      else:
        parts.append(str(k))
    return "/".join(parts)

  return jax.tree_util.tree_map_with_path(lambda p, _: name(p), tree)


def _fsdp_spec(shape, mesh: Mesh, min_size: int) -> P:
  n = mesh.shape.get("fsdp", 1)
  if n == 1 or int(np.prod(shape, dtype=np.int64)) < min_size:
    return P()
  order = sorted(range(len(shape)), key=lambda d: -shape[d])
  for d in order:
    if shape[d] % n == 0:
      spec = [None] * len(shape)
      spec[d] = "fsdp"
      return P(*spec)
  return P()


def spec_for(path: str, shape, rules, mesh: Mesh, min_size: int) -> P:
  for pattern, tactic in rules:
    if re.search(pattern, path):
      if tactic == "replicate":
        return P()
      if tactic == "fsdp":
        return _fsdp_spec(shape, mesh, min_size)
      spec = tuple(tactic)
      if len(spec) > len(shape):
        raise ValueError(f"Partition rule {pattern!r} -> {spec} has more dims than {path} {shape}")
      return P(*spec)
  return P()


def infer_shardings(abstract_tree, rules, mesh: Mesh, min_size: int = 2**12):
  """Maps a tree of ShapeDtypeStructs to NamedShardings by the first matching rule."""
  paths = tree_paths(abstract_tree)
  return jax.tree.map(
    lambda x, p: NamedSharding(mesh, spec_for(p, x.shape, rules, mesh, min_size)),
    abstract_tree,
    paths,
  )
