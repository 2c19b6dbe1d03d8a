"""One error convention for every command-line entry point.

Every CLI (`relations.evaluate ...`, `relations.train`, `relations.predict`,
`relations.datasets.prepare`, `relations.demo`) refuses bad input with one line on stderr:

  error: <file>[: <record>][: <field>]: <what is wrong and what is expected>

and exit status 2 for unusable arguments or input, 1 for a submission refused after reading it.
Python tracebacks appear only with `--debug` (or `RELATIONS_DEBUG=1`).

The pieces: `InputError` (carries file / record / field), `ArgumentParser` (argparse errors become
`InputError`s; adds `--debug`), argparse `type=` checkers (`int_in`, `float_in`, `names`,
`existing_dir`, `existing_file`, `output_file`), `read_json` (every way a JSON file can be
unreadable, named), and `entry_point`, the decorator that turns all of these - and OSError,
UnicodeDecodeError, RecursionError, MemoryError, KeyboardInterrupt - into the one line.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

DEBUG_ENV = "RELATIONS_DEBUG"
EXIT_INPUT = 2  # unusable arguments or input
EXIT_REFUSED = 1  # a submission read and refused (format errors, unscorable)


class InputError(Exception):
  """Bad input: prints as `<file>: <record>: <field>: <message>` (the parts that are known).

  Attributes:
    message: what is wrong and what is expected.
    file, record, field: where (each optional).
    status: the exit status (2: unusable input, 1: submission refused).
  """

  def __init__(
    self,
    message: str,
    file: Any = None,
    record: Any = None,
    field: Any = None,
    status: int = EXIT_INPUT,
  ):
    super().__init__(message)
    self.message, self.file, self.record, self.field = message, file, record, field
    self.status = status

  def __str__(self):
    parts = [str(p) for p in (self.file, self.record, self.field) if p is not None]
    return ": ".join(parts + [self.message])


# ------------------------------------------------------------------------------------ argparse


class ArgumentParser(argparse.ArgumentParser):
  """argparse with one-line errors (`InputError`, exit 2) and a `--debug` flag."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.add_argument(
      "--debug", action="store_true", help=f"show Python tracebacks (or set {DEBUG_ENV}=1)"
    )

  def error(self, message):
    raise InputError(f"{message} (see {self.prog} --help)")


def int_in(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
  """argparse `type=`: an integer in [lo, hi] (either bound optional)."""

  def parse(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(
        f"expected an integer{_range(lo, hi)}, got {text!r}"
      ) from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
      raise argparse.ArgumentTypeError(f"expected an integer{_range(lo, hi)}, got {value}")
    return value

  parse.__name__ = "integer"
  return parse


def float_in(
  lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> Callable[[str], float]:
  """argparse `type=`: a finite float in [lo, hi] (`(lo, hi]` with lo_open)."""

  def parse(text: str) -> float:
    want = f"a finite number{_range(lo, hi, lo_open)}"
    try:
      value = float(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
    if (
      not math.isfinite(value)
      or (lo is not None and (value <= lo if lo_open else value < lo))
      or (hi is not None and value > hi)
    ):
      raise argparse.ArgumentTypeError(f"expected {want}, got {text}")
    return value

  parse.__name__ = "number"
  return parse


def _range(lo, hi, lo_open=False) -> str:
  if lo is not None and hi is not None:
    return f" in {'(' if lo_open else '['}{lo}, {hi}]"
  if lo is not None:
    return f" {'>' if lo_open else '>='} {lo}"
  if hi is not None:
    return f" <= {hi}"
  return ""


def names(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
  """argparse `type=`: a comma-separated, non-empty list of names from `choices`."""

  def parse(text: str) -> tuple[str, ...]:
    items = tuple(t.strip() for t in text.split(","))
    if not text.strip() or any(not t for t in items):
      raise argparse.ArgumentTypeError(
        f"expected a comma-separated list of {', '.join(choices)}, got {text!r}"
      )
    unknown = [t for t in items if t not in choices]
    if unknown:
      raise argparse.ArgumentTypeError(
        f"unknown name(s) {', '.join(map(repr, unknown))}; choose from {', '.join(choices)}"
      )
    dup = sorted({t for t in items if items.count(t) > 1})
    if dup:
      raise argparse.ArgumentTypeError(f"{', '.join(map(repr, dup))} given twice")
    return items

  parse.__name__ = "names"
  return parse


def existing_dir(text: str) -> str:
  """argparse `type=`: a directory that exists; a URL (gs://...) is read into a local copy of
  the folder, whose path is returned."""
  if "://" in text:
    text = _remote(text)
  if not os.path.exists(text):
    raise argparse.ArgumentTypeError(f"{text}: no such directory")
  if not os.path.isdir(text):
    raise argparse.ArgumentTypeError(f"{text}: is a file; expected a directory")
  return text


def _remote(text: str) -> str:
  """The local copy of a URL argument (`relations.remote_inputs`), or an argparse error."""
  from relations import remote_inputs  # pylint: disable=g-import-not-at-top

  try:
    return remote_inputs.local_copy(text)
  except FileNotFoundError as e:
    raise argparse.ArgumentTypeError(str(e)) from None


def existing_file(text: str) -> str:
  """argparse `type=`: a regular file that exists; a URL (gs://...) is read into a local copy,
  whose path is returned."""
  if "://" in text:
    text = _remote(text)
  if not os.path.exists(text):
    raise argparse.ArgumentTypeError(f"{text}: no such file")
  if os.path.isdir(text):
    raise argparse.ArgumentTypeError(f"{text}: is a directory; expected a file")
  return text


def existing_path(text: str) -> str:
  """argparse `type=`: a file or directory that exists; a URL (gs://...) is read into a local
  copy (a folder whole), whose path is returned."""
  if "://" in text:
    text = _remote(text)
  if not os.path.exists(text):
    raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
  return text


def check_output_file(path: str) -> None:
  """Raises InputError unless `path` can be created as a file (checked before any work).

  Refuses an existing directory, a path below a regular file, and a directory that exists but
  is not writable. Missing parent directories are fine (the writers create them).
  """
  if "://" in path:  # a URL: left to the storage client (see check_output_dir)
    return
  if path.endswith(os.sep) or os.path.isdir(path):
    raise InputError("is a directory; expected a file path to write", file=path)
  parent = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise InputError(f"cannot create it: {parent} is a file, not a directory", file=path)
  if not os.access(parent, os.W_OK | os.X_OK):
    raise InputError(f"cannot create it: directory {parent} is not writable", file=path)


def output_file(text: str) -> str:
  """argparse `type=`: a path `check_output_file` accepts."""
  try:
    check_output_file(text)
  except InputError as e:
    raise argparse.ArgumentTypeError(str(e)) from None
  return text


def check_output_dir(path: str) -> None:
  """Raises InputError unless `path` is, or can be created as, a writable directory.

  A URL (gs://bucket/dir) is left to the storage client: it has no local parent to check, and
  `os.path.abspath` would turn it into a local `<cwd>/gs:/bucket` folder.
  """
  if "://" in path:
    return
  if os.path.exists(path) and not os.path.isdir(path):
    raise InputError("is a file; expected a directory", file=path)
  parent = os.path.abspath(path)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise InputError(f"cannot create it: {parent} is a file, not a directory", file=path)
  if not os.access(parent, os.W_OK | os.X_OK):
    raise InputError(f"cannot write there: {parent} is not writable", file=path)


# ------------------------------------------------------------------------------------ reading


def read_text(path: str, what: str = "file") -> str:
  """UTF-8 text of `path`; every failure is an InputError naming the file."""
  if not os.path.exists(path):
    raise InputError(f"no such {what}", file=path)
  if os.path.isdir(path):
    raise InputError(f"is a directory; expected a {what}", file=path)
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise InputError(f"cannot read: {e.strerror or e}", file=path) from None
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise InputError(
      f"not UTF-8 text (byte {e.start}: {data[e.start : e.start + 1]!r}); expected a UTF-8 {what}",
      file=path,
    ) from None


def parse_json(
  text: str, path: str, what: str = "JSON file", duplicate_keys: Callable[[str], None] | None = None
) -> Any:
  """`json.loads` with every failure an InputError naming `path`.

  Args:
    text: the JSON text.
    path: the file name for messages.
    what: what the file is, for messages.
    duplicate_keys: if given, called with each key that occurs twice in one object (the
      standard parser keeps the last one silently).
  """
  hook = None
  if duplicate_keys is not None:

    def hook(pairs):
      out = dict(pairs)
      if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
          if k in seen:
            duplicate_keys(k)
          seen.add(k)
      return out

  try:
    return json.loads(text, object_pairs_hook=hook)
  except json.JSONDecodeError as e:
    raise InputError(
      f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}; expected a {what}", file=path
    ) from None
  except RecursionError:
    raise InputError(f"JSON nested too deeply to read; expected a {what}", file=path) from None
  except ValueError as e:  # e.g. an integer literal beyond Python's digit limit
    raise InputError(f"unreadable JSON value: {e}", file=path) from None


def read_json(path: str, what: str = "JSON file", **kwargs) -> Any:
  """`read_text` + `parse_json`."""
  return parse_json(read_text(path, what), path, what, **kwargs)


# ------------------------------------------------------------------------------------ main


_debug_active = False


def debug_requested(argv: Iterable[str] = ()) -> bool:
  return (
    _debug_active
    or "--debug" in argv
    or os.environ.get(DEBUG_ENV, "").lower() not in ("", "0", "false", "no")
  )


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _raised_by_us(exc: BaseException) -> bool:
  """Whether `exc` was raised in this package (a message written for users), not deep inside a
  library (where the traceback is what helps)."""
  tb = exc.__traceback__
  if tb is None:
    return True
  while tb.tb_next is not None:
    tb = tb.tb_next
  return tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def report(exc: BaseException) -> int:
  """Prints the one-line message for `exc` on stderr; returns the exit status."""
  status = EXIT_INPUT
  if isinstance(exc, InputError):
    msg, status = str(exc), exc.status
  elif isinstance(exc, KeyboardInterrupt):
    msg, status = "interrupted", 130
  elif isinstance(exc, IsADirectoryError):
    msg = f"{exc.filename}: is a directory; expected a file"
  elif isinstance(exc, NotADirectoryError):
    msg = f"{exc.filename}: a part of this path is a file; expected a directory"
  elif isinstance(exc, FileNotFoundError) and exc.filename is not None:
    msg = f"{exc.filename}: no such file or directory"
  elif isinstance(exc, OSError) and exc.filename is not None:
    msg = f"{exc.filename}: {exc.strerror or exc}"
  elif isinstance(exc, FloatingPointError) and _raised_by_us(exc):
    msg, status = str(exc), 1  # e.g. the trainer stopping on a non-finite loss, step named
  elif isinstance(exc, UnicodeDecodeError):
    msg = f"input is not UTF-8 text: {exc}"
  elif isinstance(exc, (OSError, ValueError)) and str(exc) and _raised_by_us(exc):
    # Our readers and config checks raise these with the file / record / field in the message.
    msg = str(exc)
  elif isinstance(exc, RecursionError):
    msg = "input nested too deeply to read"
  elif isinstance(exc, MemoryError):
    msg = "out of memory (is an input far larger than expected?)"
  else:
    msg = (
      f"internal error: {type(exc).__name__}: {exc} (rerun with --debug or "
      f"{DEBUG_ENV}=1 for the traceback)"
    )
    status = 1
  print(f"error: {msg}", file=sys.stderr, flush=True)
  return status


def entry_point(fn: Callable[[list[str]], Any]) -> Callable[..., int]:
  """Decorator for `main(argv) -> int`: one-line errors, `--debug` for tracebacks.

  The wrapped `main(argv=None)` reads `sys.argv[1:]` when argv is None, removes `--debug`,
  silences third-party start-up noise, and returns the exit status instead of raising.
  """

  @functools.wraps(fn)
  def wrapper(argv: Sequence[str] | None = None) -> int:
    global _debug_active
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    from relations import console  # pylint: disable=g-import-not-at-top

    console.quiet_third_party()
    outer, _debug_active = _debug_active, debug
    try:
      status = fn(argv)
      return 0 if status is None else int(status)
    except SystemExit as e:  # --help, a library or an older code path calling sys.exit
      if e.code is None or isinstance(e.code, int):
        return int(e.code or 0)
      if debug:
        raise
      msg = str(e.code)
      print(msg if msg.startswith("error: ") else f"error: {msg}", file=sys.stderr, flush=True)
      return EXIT_INPUT
    except BaseException as e:  # pylint: disable=broad-except
      if debug:
        raise
      return report(e)
    finally:
      _debug_active = outer

  return wrapper
