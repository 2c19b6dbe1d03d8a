"""A full disk (or quota) while training: one line naming the file, exit 2, no partial checkpoint.

Orbax writes a checkpoint's arrays through TensorStore in background threads. When the disk
fills, the failure surfaces as a `ValueError("RESOURCE_EXHAUSTED: ... Failed writing: "<file>":
... No space left on device [os_error_code='28']")` (no errno, the file only in the text), each
orbax thread logs it with its traceback at ERROR, and TensorStore's callbacks that complete after
orbax closed its event loop print `RuntimeError: Event loop is closed` tracebacks: some 300 lines
for one cause. `guard(workdir)` turns all of that into one `DiskFullError` (an OSError with
errno ENOSPC and the file as `filename`, so `cli_errors.report` prints `error: <file>: ...` and
exits 2), drops those log records and late tracebacks, and removes the uncommitted
`<step>.orbax-checkpoint-tmp*` folders of the failed save, so nothing half-written stays in the
workdir (the committed checkpoints before it are untouched and a rerun resumes from them).

With `--debug` (or RELATIONS_DEBUG=1) nothing is dropped and the original exception is raised.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import sys
from collections.abc import Iterator

from relations import cli_errors, io_util

# Errnos of a write that failed for lack of space (quota counts: the remedy is the same).
_CODES = (errno.ENOSPC, errno.EDQUOT)
# How TensorStore / TensorFlow / libc spell these in messages without an errno attribute.
_TEXTS = (
  "No space left on device",
  "Disk quota exceeded",
  f"os_error_code='{errno.ENOSPC}'",
  f"os_error_code='{errno.EDQUOT}'",
)
# The file TensorStore failed to write: `Failed writing: "<file>"`; else any quoted absolute path.
_FAILED_WRITING = re.compile(r'Failed writing: "([^"]+)"')
_QUOTED_PATH = re.compile(r'"((?:/|[a-z][a-z0-9+.-]*://)[^"]+)"')
_STEP_TMP = re.compile(r"/(\d+)\.orbax-checkpoint-tmp")


class DiskFullError(OSError):
  """No space left while writing `filename` (errno ENOSPC; `strerror` says what to do)."""

  def __init__(self, filename: str | None, detail: str):
    super().__init__(errno.ENOSPC, detail, filename)


def _chain(exc: BaseException) -> Iterator[BaseException]:
  """`exc`, its causes and contexts, and the members of exception groups (each once)."""
  seen, todo = set(), [exc]
  while todo:
    e = todo.pop(0)
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    yield e
    todo.extend([e.__cause__, e.__context__, *getattr(e, "exceptions", ())])


def cause(exc: BaseException) -> tuple[bool, str | None]:
  """(whether `exc` comes from a full disk or quota, the file it names or None).

  The file is the first one named along the chain: an OSError's `filename`, else TensorStore's
  `Failed writing: "<file>"`, else the last quoted path of the message (the innermost one).
  """
  full, path = False, None
  for e in _chain(exc):
    text = str(e)
    if (isinstance(e, OSError) and e.errno in _CODES) or any(t in text for t in _TEXTS):
      full = True
    elif not full:
      continue
    if path is None:
      if isinstance(e, OSError) and e.filename is not None:
        path = str(e.filename)
      else:
        m = _FAILED_WRITING.search(text)
        quoted = [m.group(1)] if m else _QUOTED_PATH.findall(text)
        path = quoted[-1] if quoted else None
  return full, path


def _is_disk_full_record(record: logging.LogRecord) -> bool:
  if record.exc_info and record.exc_info[1] is not None and cause(record.exc_info[1])[0]:
    return True
  try:
    message = record.getMessage()
  except Exception:  # noqa: BLE001  (a malformed record: leave it alone)
    return False
  return any(t in message for t in _TEXTS)


def _is_closed_loop(value) -> bool:
  return isinstance(value, RuntimeError) and str(value) == "Event loop is closed"


class _Quiet(logging.Filter):
  """Drops the noise of a failed save: log records about a full disk (the one line of
  `DiskFullError` says it) and, once the disk was full (`full`), asyncio's notes on the failed
  save's leftover tasks ("Task was destroyed but it is pending!")."""

  def __init__(self):
    super().__init__()
    self.full = False

  def filter(self, record):
    if self.full and record.name == "asyncio":
      return False
    return not _is_disk_full_record(record)


def _install_hooks(quiet: _Quiet):
  """Wraps `sys.unraisablehook` / `sys.excepthook`; returns a function that restores them.

  A TensorStore write that completes after orbax closed the event loop awaiting it (orbax gives up
  on the first failed write) reports `RuntimeError: Event loop is closed` through
  `sys.unraisablehook`, one traceback per write: its result has nowhere to go, and the failure
  that made orbax give up is reported by itself, so these are always dropped. Once the disk was
  full (the process ends with one line) the leftovers of the failed save that are collected at
  shutdown are dropped too.
  """
  old_unraisable, old_except = sys.unraisablehook, sys.excepthook

  def noise(value) -> bool:
    if _is_closed_loop(value):
      return True
    if not quiet.full or value is None:
      return False
    return (isinstance(value, ImportError) and "shutting down" in str(value)) or cause(value)[0]

  def unraisablehook(unraisable):
    if not noise(unraisable.exc_value):
      old_unraisable(unraisable)

  def excepthook(tp, value, tb):
    if not noise(value):
      old_except(tp, value, tb)

  sys.unraisablehook, sys.excepthook = unraisablehook, excepthook

  def restore():
    if sys.unraisablehook is unraisablehook:
      sys.unraisablehook = old_unraisable
    if sys.excepthook is excepthook:
      sys.excepthook = old_except

  return restore


def remove_partial_checkpoints(workdir: str) -> list[str]:
  """Removes `<workdir>/checkpoints/*.orbax-checkpoint-tmp*` (saves that never committed).

  Only uncommitted folders match (orbax renames a complete save to `<step>`); the caller holds
  the workdir lock, so none belongs to a save still running. Returns the removed paths.
  """
  directory = io_util.epath(workdir) / "checkpoints"
  removed = []
  try:
    partial = sorted(directory.glob("*.orbax-checkpoint-tmp*"))
  except OSError:
    return removed
  for p in partial:
    try:
      p.rmtree() if p.is_dir() else p.unlink()
      removed.append(str(p))
    except OSError:
      pass  # best effort: orbax removes them at the next start too (cleanup_tmp_directories)
  return removed


def message(filename: str | None, removed: list[str]) -> str:
  """What failed and what to do, for `DiskFullError` (one line, after the file name).

  Args:
    filename: the file the failed write named (None: the library named none; the error then
      names the partial save folder, or the workdir).
    removed: the partial save folders removed.
  """
  m = _STEP_TMP.search(filename or "") or (_STEP_TMP.search(removed[0]) if removed else None)
  parts = [
    "No space left on device" + (f" while saving the checkpoint of step {m.group(1)}" if m else "")
  ]
  if removed:
    parts.append(
      f"removed the partial save {', '.join(removed)}" if filename else "removed this partial save"
    )
  parts.append(
    "the checkpoints saved before are intact. Free some space and rerun the same command to "
    "resume from the last one"
  )
  return "; ".join(parts)


@contextlib.contextmanager
def guard(workdir: str, enabled: bool = True, lead: bool = True) -> Iterator[None]:
  """Turns a full disk inside the block into one `DiskFullError`; see the module docstring.

  Args:
    workdir: the run's workdir (its uncommitted checkpoint folders are removed on a full disk).
    enabled: False passes everything through (e.g. under --debug).
    lead: whether this process removes the partial folders (process 0 of a multi-host run).

  Raises:
    DiskFullError: the block failed for lack of space; names the file when the error did.
  """
  if not enabled or cli_errors.debug_requested():
    yield
    return
  # Orbax logs its threads' failures through absl; asyncio logs the write tasks that failed after
  # the first one ("Task exception was never retrieved", when they are collected).
  loggers = [logging.getLogger(n) for n in ("absl", "asyncio")]
  quiet = _Quiet()
  for lg in loggers:
    lg.addFilter(quiet)
  restore_hooks = _install_hooks(quiet)
  try:
    yield
  except Exception as e:
    full, filename = cause(e)
    if not full:
      raise
    # The process ends with the one line: the filter and hooks stay (orbax threads may still log,
    # the failed save's leftovers are collected at exit).
    quiet.full = True
    removed = remove_partial_checkpoints(workdir) if lead else []
    where = filename or (removed[0] if removed else workdir)
    raise DiskFullError(where, message(filename, removed)) from None
  finally:
    if not quiet.full:
      restore_hooks()
      for lg in loggers:
        lg.removeFilter(quiet)
