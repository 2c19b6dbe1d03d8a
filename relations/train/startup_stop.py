"""SIGTERM during a trainer's start-up: stop at once with one line and exit status 143.

Before the first step (config.json, mesh, data source, compilation, checkpoint restore) there is
nothing new to save, so a stop request needs no checkpoint: the run's start-up is abandoned and
the next run starts it again. Without a handler SIGTERM killed the process mid-way with no
message; `guard()` turns it into `Stopped` (a BaseException, so no library's `except Exception`
swallows it), raised in the main thread: every `finally` on the way out runs (the workdir lock is
released, input workers are stopped, an atomic write removes its temporary file), then
`python -m relations.train` exits 143 like a preempted run (SLURM requeues it).

The first step (its batch, its compilation) still counts as start-up: the train loop's own handler
(`trainer._Preemption`, installed just before it) calls `check()`, which stops the same way until
`training_started()` is called after that step. From then on the loop's handler saves a checkpoint
after the current step; a SIGTERM after the loop (its final writes) is only noted.

Python runs the handler between bytecodes of the main thread: during a long call into C++ (an XLA
compilation) the stop takes effect when that call returns.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

MESSAGE = (
  "[train] SIGTERM during start-up (before the first step): stopped; no step was trained, so "
  "there was nothing new to save. Rerun the same command to start again."
)


class Stopped(BaseException):  # a stop request, not an error: no `except Exception` takes it
  """SIGTERM arrived before the first training step."""


_state = {"started": False}


def training_started() -> None:
  """Ends the start-up: SIGTERM from now on belongs to the train loop."""
  _state["started"] = True


def check() -> None:
  """Raises `Stopped` (after printing MESSAGE) if the start-up is not over; for SIGTERM handlers.

  Raises:
    Stopped: no training step has completed yet.
  """
  if _state["started"]:
    return
  _state["started"] = True  # one line and one exception, whatever follows
  print(MESSAGE, file=sys.stderr, flush=True)
  raise Stopped(MESSAGE)


def _handler(signum, frame):  # pylint: disable=unused-argument
  if _state["started"]:
    print("[train] SIGTERM after the last step: finishing the run's final writes", file=sys.stderr)
    return
  check()


@contextlib.contextmanager
def guard() -> Iterator[None]:
  """SIGTERM in the block raises `Stopped` until `training_started()` (main thread only)."""
  _state["started"] = False
  try:
    old = signal.signal(signal.SIGTERM, _handler)
  except ValueError:  # not the main thread (e.g. a test runner's worker): nothing to install
    yield
    return
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, old)
    _state["started"] = True
