"""Atomic file writes: write to a temporary file beside the target, then rename.

A reader (or a resumed run) never sees a half-written file, and a crash leaves no partial file
under the target's name (nor a temporary one). JSON is written strictly: NaN / Infinity, which
`json.dumps` would write as bare `NaN` (not JSON), become `null` with a warning on stderr naming
the key.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from typing import Any

import numpy as np


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


def write_json_atomic(path: str, obj: Any, **dump_kw) -> None:
  """`json.dump(obj, indent=2)` plus a final newline, written atomically to `path`.

  Non-finite floats are written as `null`, each with a `warning:` line on stderr naming the key.
  """
  dump_kw.setdefault("indent", 2)
  obj, bad = strict_json(obj)
  for b in bad[:20]:
    print(f"warning: {path}: {b} is not a JSON number; written as null", file=sys.stderr)
  if len(bad) > 20:
    print(f"warning: {path}: {len(bad) - 20} more non-finite values written as null",
          file=sys.stderr)
  write_text_atomic(path, json.dumps(obj, allow_nan=False, **dump_kw) + "\n")
