"""Checksums of every file of a checkpoint, recorded when it is saved and checked before a restore.

Orbax reads its array chunks without verifying them: a flipped byte in a data file loads as a
wrong parameter, silently. So each save records the SHA-256 of every file under the step's item
folders (`state/`, `meta/`) in `<step>/relations_checksums.json`; a restore first recomputes them
and refuses a checkpoint whose files differ or are missing, naming the step and the file.

When the record is written: with async saves, in orbax's post-finalization callback, i.e. after
the files are complete and *before* the step folder is committed (renamed to `<step>`), so every
committed step has its record. With synchronous saves (no such callback), right after the commit.
A checkpoint without a record (saved before this existed, or killed between a synchronous
commit and its record) is restored unverified, with a warning.

Paths are `etils.epath` paths (local folders and buckets alike).
"""

from __future__ import annotations

import hashlib
import json
import sys

from etils import epath

MANIFEST = "relations_checksums.json"
# Written by orbax at commit time, after the record (so they cannot be in it).
_NOT_RECORDED = {MANIFEST, "commit_success.txt"}
_CHUNK = 1 << 20


class CheckpointDamagedError(ValueError):
  """A checkpoint whose files are missing, unreadable or differ from their recorded checksums."""

  def __init__(self, step: int, path, reason: str):
    super().__init__(f"{path}: checkpoint of step {step} is damaged: {reason}")
    self.step, self.path, self.reason = step, path, reason


def _sha256(path: epath.Path) -> str:
  h = hashlib.sha256()
  with path.open("rb") as f:
    while chunk := f.read(_CHUNK):
      h.update(chunk)
  return h.hexdigest()


def _files(step_dir: epath.Path) -> list[str]:
  """Relative paths of the files under `step_dir`'s item folders (what orbax finalized)."""
  out = []

  def walk(d: epath.Path, rel: str):
    for p in d.iterdir():
      r = f"{rel}/{p.name}" if rel else p.name
      if p.is_dir():
        walk(p, r)
      elif rel and p.name not in _NOT_RECORDED:  # top-level files are orbax's commit metadata
        out.append(r)

  walk(step_dir, "")
  return sorted(out)


def write_manifest(step_dir, step: int) -> None:
  """Records the checksums of `step_dir`'s files in `step_dir/relations_checksums.json`."""
  step_dir = epath.Path(step_dir)
  files = {rel: _sha256(step_dir / rel) for rel in _files(step_dir)}
  tmp = step_dir / f".{MANIFEST}.tmp"
  tmp.write_text(json.dumps({"step": int(step), "sha256": files}, indent=1, sort_keys=True))
  tmp.rename(step_dir / MANIFEST)


def verify(step_dir, step: int) -> bool:
  """Checks every file of the checkpoint `step_dir` against its recorded checksum.

  Returns:
    True when verified; False when the checkpoint has no record (it cannot be verified).

  Raises:
    CheckpointDamagedError: an empty step folder, an unreadable record, a recorded file missing,
      or a file whose content differs from its checksum (names the file).
  """
  step_dir = epath.Path(step_dir)
  if not step_dir.is_dir() or not any(step_dir.iterdir()):
    raise CheckpointDamagedError(step, step_dir, "empty folder (a save that wrote no files)")
  record = step_dir / MANIFEST
  if not record.exists():
    return False
  try:
    recorded = json.loads(record.read_text())["sha256"]
    if not isinstance(recorded, dict):
      raise TypeError("'sha256' is not an object")
  except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
    raise CheckpointDamagedError(step, record, f"unreadable checksum record ({e})") from None
  for rel, digest in sorted(recorded.items()):
    path = step_dir / rel
    if not path.exists():
      raise CheckpointDamagedError(step, path, "file missing (recorded at save)")
    if _sha256(path) != digest:
      raise CheckpointDamagedError(
        step, path, "content differs from the checksum recorded at save (corrupted on disk)"
      )
  return True


class Recorder:
  """Orbax post-finalization callback that records the checksums of the step being saved.

  `pending` lists the steps handed to `manager.save`, oldest first (an async save finalizes after
  the next save has begun, and orbax finalizes them in order). The callback finds the oldest one's
  uncommitted folder (`<step>.orbax-checkpoint-tmp*`, or `<step>` where orbax writes in place, as
  on buckets).
  """

  def __init__(self, directory, enabled: bool):
    self.directory = epath.Path(directory)
    self.enabled = enabled
    self.pending: list[int] = []

  def __call__(self) -> None:
    if not self.pending:
      return
    step = self.pending.pop(0)
    if not self.enabled:
      return
    tmp = sorted(self.directory.glob(f"{step}.orbax-checkpoint-tmp*"))
    write_manifest(tmp[-1] if tmp else self.directory / str(step), step)


def warn(message: str) -> None:
  print(f"warning: {message}", file=sys.stderr, flush=True)
