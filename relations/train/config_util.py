"""Config helpers: typed `key=value` config args, loading `configs/x.py:arg` with overrides.

A config file defines `get_config(arg=None) -> ml_collections.ConfigDict` and typically starts with

  arg = parse_arg(arg, variant="Ti/16", tiny=False)

so that `configs/x.py:tiny`, `configs/x.py:variant=B/16,tiny` and `configs/x.py:variant=S/16` all work.
Unknown keys and values of the wrong type raise `ValueError` naming the key.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from typing import Any, Sequence

import ml_collections


def _convert(key: str, value: str, default: Any) -> Any:
  if isinstance(default, bool):
    low = value.lower()
    if low in ("true", "1", "yes", ""):
      return True
    if low in ("false", "0", "no"):
      return False
    raise ValueError(f"Config arg {key!r} expects a bool (true/false), got {value!r}")
  if isinstance(default, int):
    try:
      return int(value)
    except ValueError:
      raise ValueError(f"Config arg {key!r} expects an int, got {value!r}") from None
  if isinstance(default, float):
    try:
      return float(value)
    except ValueError:
      raise ValueError(f"Config arg {key!r} expects a float, got {value!r}") from None
  return value


def parse_arg(arg: str | None, **defaults: Any) -> ml_collections.ConfigDict:
  """Parses 'a=1,b=foo,flag' against typed defaults.

  A bare name sets a bool default to True (`tiny`); a bare value that is not a key sets the first key
  (`configs/x.py:B/16` sets `variant` when it is the first default).

  Args:
    arg: the string after ':' in `--config configs/x.py:arg`, or None.
    **defaults: the allowed keys with default values; their types are enforced.

  Returns:
    A locked ConfigDict of the parsed values.

  Raises:
    ValueError: an unknown key or a value that does not convert to the default's type.
  """
  out = dict(defaults)
  if arg:
    first = next(iter(defaults), None)
    for item in arg.split(","):
      item = item.strip()
      if not item:
        continue
      if "=" in item:
        key, value = item.split("=", 1)
      elif item in defaults:
        key, value = item, "true"
      elif first is not None and not isinstance(defaults[first], bool):
        key, value = first, item
      else:
        raise ValueError(f"Unknown config arg {item!r}; known keys: {sorted(defaults)}")
      key = key.strip()
      if key not in defaults:
        raise ValueError(f"Unknown config arg {key!r}; known keys: {sorted(defaults)}")
      out[key] = _convert(key, value.strip(), defaults[key])
  cd = ml_collections.ConfigDict(out)
  cd.lock()
  return cd


def _load_module(path: str):
  spec = importlib.util.spec_from_file_location(
      "relations_config_" + os.path.basename(path).removesuffix(".py"), path)
  if spec is None or spec.loader is None:
    raise FileNotFoundError(f"Config file not found or not Python: {path}")
  module = importlib.util.module_from_spec(spec)
  # Config files share helpers in their own folder (`import common`): put it first on the path
  # while this one runs, and forget those helpers afterwards so another folder's copy can load.
  folder = os.path.dirname(os.path.abspath(path))
  before = set(sys.modules)
  sys.path.insert(0, folder)
  try:
    spec.loader.exec_module(module)
  finally:
    sys.path.remove(folder)
    for name in set(sys.modules) - before:
      if os.path.dirname(os.path.abspath(getattr(sys.modules[name], "__file__", None) or "")) == folder:
        del sys.modules[name]
  return module


def _parse_value(key: str, raw: str, current: Any) -> Any:
  """Parses an override string to the type of the field it replaces."""
  if isinstance(current, str):
    return raw
  if isinstance(current, bool):
    return _convert(key, raw, current)
  try:
    value = ast.literal_eval(raw)
  except (ValueError, SyntaxError):
    if current is None:
      return raw
    raise ValueError(f"Override --config.{key}={raw!r} is not a Python literal") from None
  if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  return value


def apply_overrides(config: ml_collections.ConfigDict,
                    overrides: Sequence[str]) -> ml_collections.ConfigDict:
  """Applies 'a.b=value' strings to a locked config; unknown fields raise naming the field."""
  for ov in overrides:
    ov = ov.removeprefix("--config.")
    if "=" not in ov:
      raise ValueError(f"Override {ov!r} is not of the form field=value")
    key, raw = ov.split("=", 1)
    parts = key.split(".")
    node = config
    for i, part in enumerate(parts[:-1]):
      if part not in node:
        raise ValueError(f"Unknown config field {'.'.join(parts[:i + 1])!r} (in override {ov!r})")
      node = node[part]
    leaf = parts[-1]
    if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
      raise ValueError(f"Unknown config field {key!r} (in override {ov!r})")
    current = node[leaf]
    value = _parse_value(key, raw, current)
    try:
      node[leaf] = value
    except TypeError as e:
      raise ValueError(f"Config field {key!r}: cannot set {raw!r}: {e}") from None
  return config


# Trainer settings every config has (added by `load_config` where a config file does not set
# them, so that `--config.<key>=...` works for all of them); relations.train.trainer reads
# them with these defaults.
TRAINER_DEFAULTS = {
    "grad_accum_steps": 1,
    "fsdp_min_size": 2**12,          # leaves smaller than this (elements) stay replicated
    "checkpoint_every": 100,
    "keep_checkpoints": 2,
    "async_checkpoints": True,
    "log_every": 10,
    "check_finite_every": 1,
    "preemption_sync_every": 10,     # multi-process runs agree on SIGTERM this often
}


def load_config(spec: str, overrides: Sequence[str] = ()) -> ml_collections.ConfigDict:
  """Loads `path/to/config.py[:arg]`, adds missing `TRAINER_DEFAULTS`, locks it and applies
  `field=value` overrides.

  Relative paths are tried from the working directory and then from the repository root, so
  `configs/occlusion.py:tiny` works from anywhere inside a checkout.
  """
  path, _, arg = spec.partition(":")
  if not os.path.exists(path):
    repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    alt = os.path.join(repo_root, path)
    if os.path.exists(alt):
      path = alt
    else:
      raise FileNotFoundError(f"Config file not found: {path}")
  module = _load_module(path)
  config = module.get_config(arg or None)
  with config.unlocked():
    for key, value in TRAINER_DEFAULTS.items():
      if key not in config:
        config[key] = value
  config.lock()
  return apply_overrides(config, overrides)
