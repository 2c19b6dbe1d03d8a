"""Atomic file writes: write to a temporary file beside the target, then rename.

A reader (or a resumed run) never sees a half-written file, and a crash leaves no partial file
under the target's name.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_text_atomic(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` through a temporary file in the same directory."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=os.path.basename(path), dir=directory)
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_json_atomic(path: str, obj: Any, **dump_kw) -> None:
  """`json.dump(obj, indent=2)` plus a final newline, written atomically to `path`."""
  dump_kw.setdefault("indent", 2)
  write_text_atomic(path, json.dumps(obj, **dump_kw) + "\n")
