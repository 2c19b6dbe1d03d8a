"""Reading submissions / ground truth and writing metrics for the VRD CLI.

Submission (spec 2.3): `{"version": "VERSION 1.0", "results": {video_id:
[{triplet, score, duration, sub_traj, obj_traj}]}, "external_data": ...}` as
`.json` or XZ-compressed `.json.xz` (the VRU'20 server's upload format).
Ground truth: an official annotation folder / file or one consolidated GT JSON
(`relations.datasets.vrd_json.load_groundtruth`).
"""

import json
import lzma
import os
import tempfile
from typing import Any

from relations.datasets import vrd_json


class SubmissionError(ValueError):
  """A submission file that cannot be read as JSON."""


def load_submission(path: str) -> Any:
  """Parses a submission `.json` or `.json.xz` (detected by content).

  Raises:
    FileNotFoundError: no such file.
    SubmissionError: unreadable / not JSON, naming the file.
  """
  with open(path, "rb") as f:
    head = f.read(6)
  try:
    if head.startswith(b"\xfd7zXZ\x00"):
      with lzma.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)
    with open(path, "r", encoding="utf-8") as f:
      return json.load(f)
  except (lzma.LZMAError, EOFError, UnicodeDecodeError) as e:
    raise SubmissionError(f"{path}: cannot decompress / decode: {e}") from e
  except json.JSONDecodeError as e:
    raise SubmissionError(f"{path}: malformed JSON: {e}") from e


def load_groundtruth(path: str, dataset: str | None = None) -> dict:
  """Official GT `{video_id: [instances]}` from a folder, file or GT JSON."""
  return vrd_json.load_groundtruth(path, dataset=dataset)


def write_json_atomic(path: str, obj: Any) -> None:
  """Writes JSON to a temporary file next to `path`, then renames it."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_",
                             suffix=os.path.basename(path))
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      json.dump(obj, f, indent=2, sort_keys=False)
      f.write("\n")
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
