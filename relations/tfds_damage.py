"""Damaged prepared datasets become one error naming the file (issue 36).

A flipped byte in an array_record shard surfaces from ArrayRecord as "Corrupted Riegeli/records
file: chunk data hash mismatch", a truncated shard as "ArrayRecord file should be at least 64KB
big", and a garbled `dataset_info.json` as protobuf's "Failed to parse splits field: ..." - none
names the file, so the user cannot tell which dataset (or copy of it) to rebuild. Here:

- `guard_builder(builder)`: the builder's `as_data_source` returns sources whose reads turn such
  errors into `DamagedDatasetError` naming the shard file and the record's index in it;
- `open_checked(open_fn, data_dir)`: `dataset_info.json` errors when a builder is opened become
  one naming that file and the field.

Both say what to do: delete the dataset's folder and prepare it again.
"""

from __future__ import annotations

import functools
import os
import re

from relations.cli_errors import InputError

# What ArrayRecord / Riegeli say about a damaged file (checked against their messages: a flipped
# byte, a truncated file, a file that is not a Riegeli file at all).
_SHARD_DAMAGE = re.compile(
  r"Riegeli|ArrayRecord file should be|Invalid file signature|hash mismatch|DATA_LOSS|truncated",
  re.IGNORECASE,
)


class DamagedDatasetError(InputError):
  """A prepared dataset's file is unreadable (prints as one `file: record: message` line)."""


def _advice(folder: str) -> str:
  return (
    f"delete {folder} and prepare the dataset again (python -m relations.datasets.prepare ... "
    "--manual_dir ...)"
  )


def _first_line(exc: BaseException) -> str:
  text = str(exc).strip().splitlines()
  return text[0] if text else type(exc).__name__


def shard_error(exc: BaseException, filename: str, position: int | None) -> DamagedDatasetError:
  """The error for `exc` raised while reading record `position` of shard `filename`."""
  return DamagedDatasetError(
    f"damaged dataset file ({_first_line(exc)}); {_advice(os.path.dirname(str(filename)))}",
    file=str(filename),
    record=None if position is None else f"record {position}",
  )


class GuardedRecords:
  """ArrayRecord's random-access source, with damage errors naming shard and record.

  Picklable like the source it wraps (grain sends sources to its worker processes).
  """

  def __init__(self, records):
    self._records = records

  def __len__(self):
    return len(self._records)

  def __iter__(self):
    for i in range(len(self._records)):
      yield self[i]

  def __getattr__(self, name):  # anything else: as the wrapped source
    if name == "_records":  # not yet set (while unpickling)
      raise AttributeError(name)
    return getattr(self._records, name)

  def _where(self, key) -> tuple[str, int | None]:
    """(shard file, index in it) of global record `key`; ArrayRecord's own mapping."""
    try:
      idx, position = self._records._reader_idx_and_position(key)  # pylint: disable=protected-access
      return str(self._records._read_instructions[idx].filename), int(position)  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except
      paths = getattr(self._records, "_paths", None) or ["<unknown shard>"]
      return str(paths[0]), None

  def __getitem__(self, key):
    try:
      return self._records[key]
    except Exception as e:  # pylint: disable=broad-except
      if not _SHARD_DAMAGE.search(str(e)):
        raise
      raise shard_error(e, *self._where(key)) from e

  def __getitems__(self, keys):
    try:
      return self._records.__getitems__(keys)
    except Exception as e:  # pylint: disable=broad-except
      if not _SHARD_DAMAGE.search(str(e)):
        raise
      # Re-read one by one to name the damaged record (the batch read does not say which).
      return [self[k] for k in keys]


def guard_source(source):
  """`source` (a TFDS data source) with its record reader wrapped in `GuardedRecords`."""
  records = getattr(source, "data_source", None)
  if records is not None and not isinstance(records, GuardedRecords):
    source.data_source = GuardedRecords(records)
  return source


def guard_builder(builder):
  """`builder`, whose `as_data_source(...)` now returns guarded sources."""
  if getattr(builder, "_relations_guarded", False):
    return builder
  plain = builder.as_data_source

  @functools.wraps(plain)
  def as_data_source(*args, **kwargs):
    return guard_source(plain(*args, **kwargs))

  builder.as_data_source = as_data_source
  builder._relations_guarded = True  # pylint: disable=protected-access
  return builder


_FIELD = re.compile(r"Failed to parse (\w+) field")


def dataset_info_error(exc: BaseException, data_dir: str) -> DamagedDatasetError | None:
  """The error naming `dataset_info.json` for a protobuf/JSON parse failure `exc`, else None."""
  if type(exc).__name__ not in ("ParseError", "JSONDecodeError", "DecodeError"):
    return None
  path = _find_info_file(str(exc), data_dir)
  field = _FIELD.search(str(exc))
  return DamagedDatasetError(
    f"damaged dataset description ({_first_line(exc).rstrip('.')}); "
    f"{_advice(os.path.dirname(path))}",
    file=path,
    field=field.group(1) if field else None,
  )


def _find_info_file(message: str, data_dir: str) -> str:
  """The `dataset_info.json` of the failure: named in the message, else the one under
  `data_dir` that does not parse (TFDS reads one per builder)."""
  m = re.search(r"(\S+dataset_info\.json)", message)
  if m:
    return m.group(1)
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.core.proto import dataset_info_pb2  # pylint: disable=g-import-not-at-top

  found = []
  for root, _, files in os.walk(str(data_dir)):
    if "dataset_info.json" in files and not os.path.basename(root).startswith("incomplete."):
      found.append(os.path.join(root, "dataset_info.json"))
  for path in sorted(found):
    try:
      with open(path) as f:
        json_format.Parse(f.read(), dataset_info_pb2.DatasetInfo(), ignore_unknown_fields=True)
    except Exception:  # pylint: disable=broad-except
      return path
  return os.path.join(str(data_dir), "dataset_info.json")


def open_checked(open_fn, data_dir: str):
  """`open_fn()` (opens a builder), with a damaged `dataset_info.json` named; the builder is
  guarded (`guard_builder`)."""
  try:
    builder = open_fn()
  except Exception as e:  # pylint: disable=broad-except
    err = dataset_info_error(e, data_dir)
    if err is None:
      raise
    raise err from e
  return guard_builder(builder)
