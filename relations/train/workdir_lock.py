"""One training run per workdir: a lock file held by the running trainer.

Two trainers in one workdir would overwrite each other's checkpoints, `config.json` and summary.
`hold(workdir)` creates `<workdir>/train.lock` exclusively (JSON: host, pid, start time) and
removes it on every way out of the block (return, exception, Ctrl-C, SIGTERM via the trainer's
preemption handling). A lock left by a killed run (SIGKILL, power loss) names a process that no
longer exists: on the same host it is taken over, with a note; a lock from another host cannot
be checked from here, so the message says how to remove it.

Multi-host runs: process 0 holds it for the run (the workdir is shared). Bucket workdirs
(`gs://...`) are not locked: object stores have no exclusive create.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import sys
from typing import Iterator

LOCK_NAME = "train.lock"


class WorkdirLockedError(ValueError):
  """Another live run holds the workdir's lock."""


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # exists, another user's
    return True
  return True


def _read(path: str) -> dict:
  try:
    with open(path, encoding="utf-8") as f:
      info = json.load(f)
    return info if isinstance(info, dict) else {}
  except (OSError, ValueError):
    return {}


def _try_create(path: str, info: dict) -> bool:
  try:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
  except FileExistsError:
    return False
  with os.fdopen(fd, "w", encoding="utf-8") as f:
    json.dump(info, f)
  return True


def acquire(workdir: str) -> str:
  """Takes `workdir`'s lock; returns the lock file's path.

  Raises:
    WorkdirLockedError: a live run (this host), or a run on another host, holds it.
  """
  path = os.path.join(workdir, LOCK_NAME)
  host = socket.gethostname()
  info = {
    "host": host,
    "pid": os.getpid(),
    "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }
  for _ in range(3):
    if _try_create(path, info):
      return path
    other = _read(path)
    o_host, o_pid = other.get("host"), other.get("pid")
    if not isinstance(o_pid, int) or o_host is None:
      # Unreadable (a run killed while writing it, or a partial copy): written by no live run
      # we could name; take it over.
      note = "an unreadable lock"
    elif o_host == host and not _alive(o_pid):
      note = f"the lock of a run that is gone (pid {o_pid}, started {other.get('started')})"
    else:
      where = "this host" if o_host == host else f"host {o_host}"
      raise WorkdirLockedError(
        f"{workdir}: another training run is using this workdir ({where}, pid {o_pid}, "
        f"started {other.get('started')}); wait for it or stop it, or pass another --workdir"
        + ("" if o_host == host else f" (if that run is gone, remove {path})")
      )
    print(f"note: {path}: taking over {note}", file=sys.stderr, flush=True)
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)
  raise WorkdirLockedError(f"{path}: could not take the workdir lock (other runs keep taking it)")


def release(path: str) -> None:
  """Removes the lock file if it is still this process's."""
  if _read(path).get("pid") == os.getpid() and _read(path).get("host") == socket.gethostname():
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


@contextlib.contextmanager
def hold(workdir: str, enabled: bool = True) -> Iterator[None]:
  """Holds `workdir`'s lock for the block (no-op when not `enabled`, e.g. processes > 0, and
  for bucket URLs, which have no exclusive create)."""
  if not enabled or "://" in str(workdir):
    yield
    return
  path = acquire(workdir)
  try:
    yield
  finally:
    release(path)
