"""Opt-in multi-host initialisation.

`jax.distributed.initialize` must run before any other JAX call (after it the backend is fixed and
a late call silently does nothing useful), and calling it unconditionally breaks single-host runs.
So it runs only when asked: `--distributed` on the command line or `RELATIONS_JAX_INIT=1`.
Explicit coordinates come from `RELATIONS_COORDINATOR` (host:port), `RELATIONS_NUM_PROCESSES`,
`RELATIONS_PROCESS_ID` (needed on CPU); without them JAX auto-detects TPU pods and SLURM.
"""

from __future__ import annotations

import os

_initialized = False


def requested(flag: bool = False) -> bool:
  return flag or os.environ.get("RELATIONS_JAX_INIT", "") not in ("", "0", "false")


def maybe_initialize(flag: bool = False) -> bool:
  """Initialises jax.distributed if requested; returns whether it did."""
  global _initialized
  if _initialized or not requested(flag):
    return _initialized
  import jax  # pylint: disable=g-import-not-at-top

  kwargs = {}
  if os.environ.get("RELATIONS_COORDINATOR"):
    kwargs = dict(
      coordinator_address=os.environ["RELATIONS_COORDINATOR"],
      num_processes=int(os.environ["RELATIONS_NUM_PROCESSES"]),
      process_id=int(os.environ["RELATIONS_PROCESS_ID"]),
      initialization_timeout=int(os.environ.get("RELATIONS_INIT_TIMEOUT", "300")),
    )
  jax.distributed.initialize(**kwargs)
  _initialized = True
  return True
