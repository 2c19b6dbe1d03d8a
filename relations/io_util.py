"""Atomic file writes and small I/O helpers.

Every file the project writes goes through `atomic_path`: the content is written to a temporary
file beside the target, then renamed onto it. A reader (or a resumed run) never sees a
half-written file, and a failed or interrupted write leaves nothing under the target's name and no
temporary file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
  """Yields a temporary path in `path`'s directory; renames it onto `path` if the block succeeds.

  The temporary name keeps `path`'s suffix (writers that pick a format by extension still work)
  and starts with `.tmp_` (directory listings of a dataset can skip it). On any exception the
  temporary file is removed and the exception propagates.
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=os.path.basename(path), dir=directory)
  os.close(fd)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_bytes_atomic(path: str, data: bytes) -> None:
  """Writes `data` to `path` atomically."""
  with atomic_path(path) as tmp, open(tmp, "wb") as f:
    f.write(data)


def write_text_atomic(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` atomically."""
  write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str, obj: Any, *, newline: bool = True, **dump_kw) -> None:
  """`json.dumps(obj, indent=2, **dump_kw)` (plus a final newline) written atomically to `path`."""
  dump_kw.setdefault("indent", 2)
  write_text_atomic(path, json.dumps(obj, **dump_kw) + ("\n" if newline else ""))


def as_str(value: Any) -> str:
  """A TFDS text feature (bytes, UTF-8) or any other value as `str`."""
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)
