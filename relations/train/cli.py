"""Command-line parsing shared by `python -m relations.train` and `python -m relations.predict`.

`--config configs/x.py:arg` plus any number of `--config.field=value` overrides (checked against the
locked config, so a misspelled field fails and names itself).
"""

from __future__ import annotations

import os
from typing import Sequence

from relations import cli_errors


def parse(argv: Sequence[str], description: str, extra=None, prog: str | None = None):
  """Returns (args, overrides). `extra(parser)` may add more flags.

  Raises:
    cli_errors.InputError: unknown flags, a flag without its value.
  """
  parser = cli_errors.ArgumentParser(
    description=description, prog=f"python -m {prog}" if prog else None
  )
  parser.add_argument("--config", required=True, help="configs/x.py[:arg]")
  parser.add_argument("--workdir", required=True, help="checkpoints, logs and outputs go here")
  parser.add_argument(
    "--distributed",
    action="store_true",
    help="call jax.distributed.initialize() first (or RELATIONS_JAX_INIT=1)",
  )
  if extra:
    extra(parser)
  args, rest = parser.parse_known_args(list(argv))
  overrides, unknown = [], []
  i = 0
  while i < len(rest):
    a = rest[i]
    if a.startswith("--config."):
      if "=" not in a:  # `--config.x value`
        if i + 1 >= len(rest):
          parser.error(f"{a} needs a value")
        a = f"{a}={rest[i + 1]}"
        i += 1
      overrides.append(a[len("--config.") :])
    else:
      unknown.append(a)
    i += 1
  if unknown:
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")
  return args, overrides


def _has_prepared_dataset(data_dir) -> bool:
  """Whether `data_dir` holds a prepared TFDS dataset (`<name>/<config>/<version>/`).

  A run on data prepared elsewhere (a read-only copy, another host's build) needs no release
  files, so a missing `manual_dir` is only an error when there is nothing prepared to read.
  """
  if not isinstance(data_dir, str) or not data_dir:
    return False
  if "://" in data_dir:
    return True  # a bucket: left to TFDS
  for depth, (root, dirs, files) in enumerate(os.walk(data_dir)):
    if "dataset_info.json" in files:
      return True
    if depth > 200:
      break
    dirs[:] = (
      [d for d in dirs if not d.startswith(".")]
      if root.count(os.sep) - data_dir.count(os.sep) < 3
      else []
    )
  return False


def load_checked_config(spec: str, overrides: Sequence[str]):
  """`config_util.load_config` with every problem an `InputError` naming the config.

  Runs before anything is written or built, so a typo costs nothing.
  """
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  try:
    config = config_util.load_config(spec, overrides)
  except FileNotFoundError as e:
    raise cli_errors.InputError(str(e)) from None
  except (ValueError, TypeError, AttributeError, KeyError) as e:
    # get_config / parse_arg / overrides / check_config name the key; add the config.
    msg = str(e).strip("'\"") if isinstance(e, KeyError) else str(e)
    raise cli_errors.InputError(msg, file=spec) from None
  data = config.get("data") or {}
  manual_dir = data.get("manual_dir") if hasattr(data, "get") else None
  data_dir = data.get("data_dir") if hasattr(data, "get") else None
  if (
    isinstance(manual_dir, str)
    and manual_dir
    and "://" not in manual_dir
    and not os.path.isdir(manual_dir)
    and not _has_prepared_dataset(data_dir)
  ):
    raise cli_errors.InputError(
      f"{manual_dir}: no such directory; expected the dataset's official release files "
      "(see the builder's MANUAL_DOWNLOAD_INSTRUCTIONS)",
      file=spec,
      field="data.manual_dir",
    )
  return config
