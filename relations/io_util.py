"""Atomic file writes and small I/O helpers.

Every file the project writes goes through `atomic_path`: the content is written to a temporary
file beside the target, then renamed onto it. A reader (or a resumed run) never sees a
half-written file, and a failed or interrupted write leaves nothing under the target's name and no
temporary file behind. A URL target (`gs://bucket/...`, any scheme etils.epath knows) is written
from a local temporary file in one upload: an object store shows an object whole or not at all, so
that is atomic too, and a URL is never turned into a local path (`os.path.abspath("gs://b")` would
be `<cwd>/gs:/b`). JSON is written strictly: NaN / Infinity, which `json.dumps` would write as
bare `NaN` (not JSON), become `null` with a warning on stderr naming the key.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from typing import Any, Iterator

import numpy as np


def is_url(path) -> bool:
  """Whether `path` names an object-store location (`gs://...`, `s3://...`), not a local file."""
  return "://" in os.fspath(path)


def local_abspath(path):
  """`os.path.abspath` for a local path; a URL unchanged (str)."""
  path = os.fspath(path)
  return path if is_url(path) else os.path.abspath(path)


def epath(path):
  """`etils.epath.Path` of a local path or URL (tf.io.gfile or gcsfs underneath)."""
  from etils import epath as epath_lib  # pylint: disable=g-import-not-at-top

  return epath_lib.Path(path)


def makedirs(path) -> None:
  """`os.makedirs(path, exist_ok=True)` for a local path or a URL."""
  if is_url(path):
    epath(path).mkdir(parents=True, exist_ok=True)
  else:
    os.makedirs(path, exist_ok=True)


def isdir(path) -> bool:
  return epath(path).is_dir() if is_url(path) else os.path.isdir(path)


def exists(path) -> bool:
  return epath(path).exists() if is_url(path) else os.path.exists(path)


def listdir(path) -> list[str]:
  """Names in directory `path` (local or URL)."""
  if is_url(path):
    return sorted(p.name for p in epath(path).iterdir())
  return sorted(os.listdir(path))


def read_bytes(path) -> bytes:
  if is_url(path):
    return epath(path).read_bytes()
  with open(path, "rb") as f:
    return f.read()


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
  """Yields a temporary path in `path`'s directory; renames it onto `path` if the block succeeds.

  The temporary name keeps `path`'s suffix (writers that pick a format by extension still work)
  and starts with `.tmp_` (directory listings of a dataset can skip it). On any exception the
  temporary file is removed and the exception propagates. For a URL `path` the temporary file is
  local and is uploaded in one piece on success.
  """
  if is_url(path):
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=os.path.basename(os.fspath(path)))
    os.close(fd)
    try:
      yield tmp
      with open(tmp, "rb") as f:
        epath(path).write_bytes(f.read())
    finally:
      os.remove(tmp)
    return
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=os.path.basename(path), dir=directory)
  try:
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the mode open() would
  finally:
    os.close(fd)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException as e:
    if os.path.exists(tmp):
      os.remove(tmp)
    if isinstance(e, OSError) and e.filename in (None, tmp) and e.errno is not None:
      # A write error (disk full, quota) names no file or the temporary one: name the target.
      raise OSError(e.errno, e.strerror or str(e), path) from e
    raise


def _umask() -> int:
  """This process's umask, read without changing it (os.umask sets it, racing other threads)."""
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  except (OSError, ValueError):
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def write_bytes_atomic(path: str, data: bytes) -> None:
  """Writes `data` to `path` atomically."""
  with atomic_path(path) as tmp, open(tmp, "wb") as f:
    f.write(data)


def write_text_atomic(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` atomically."""
  write_bytes_atomic(path, text.encode("utf-8"))


def as_str(value: Any) -> str:
  """A TFDS text feature (bytes, UTF-8) or any other value as `str`."""
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def strict_json(obj: Any, where: str = "") -> tuple[Any, list[str]]:
  """(copy of `obj` with non-finite floats -> None and numpy scalars -> Python, their key paths).

  Key paths read like `zero_shot/mAP` or `curves/3`; lists, tuples and dicts are walked.
  """
  bad: list[str] = []

  def walk(x, key):
    if isinstance(x, (np.floating, np.integer, np.bool_)):
      x = x.item()
    if isinstance(x, float):
      if not math.isfinite(x):
        bad.append(f"{key or '<top>'} = {x}")
        return None
      return x
    if isinstance(x, dict):
      return {k: walk(v, f"{key}/{k}" if key else str(k)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
      return [walk(v, f"{key}/{i}" if key else str(i)) for i, v in enumerate(x)]
    return x

  return walk(obj, where), bad


def write_json_atomic(path: str, obj: Any, *, newline: bool = True, **dump_kw) -> None:
  """`json.dumps(obj, indent=2, **dump_kw)` (plus a final newline) written atomically to `path`.

  Non-finite floats are written as `null`, each with a `warning:` line on stderr naming the key.
  """
  dump_kw.setdefault("indent", 2)
  obj, bad = strict_json(obj)
  for b in bad[:20]:
    print(f"warning: {path}: {b} is not a JSON number; written as null", file=sys.stderr)
  if len(bad) > 20:
    print(
      f"warning: {path}: {len(bad) - 20} more non-finite values written as null", file=sys.stderr
    )
  write_text_atomic(path, json.dumps(obj, allow_nan=False, **dump_kw) + ("\n" if newline else ""))
