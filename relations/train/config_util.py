"""Config helpers: typed `key=value` config args, loading `configs/x.py:arg` with overrides.

A config file defines `get_config(arg=None) -> ml_collections.ConfigDict` and typically starts with

  arg = parse_arg(arg, variant="Ti/16", tiny=False)

so that `configs/x.py:tiny`, `configs/x.py:variant=B/16,tiny` and `configs/x.py:variant=S/16` all work.
Unknown keys and values of the wrong type raise `ValueError` naming the key.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import math
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
      elif difflib.get_close_matches(item, list(defaults), n=1, cutoff=0.75):
        # `:tny` would otherwise silently become the first key's value (variant="tny").
        near = difflib.get_close_matches(item, list(defaults), n=1, cutoff=0.75)[0]
        raise ValueError(
          f"Unknown config arg {item!r}; did you mean {near!r}? Known keys: {sorted(defaults)}"
        )
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
  if os.path.isdir(path):
    raise ValueError(f"{path}: is a directory; expected a config file configs/<task>.py")
  spec = importlib.util.spec_from_file_location(
    "relations_config_" + os.path.basename(path).removesuffix(".py"), path
  )
  if spec is None or spec.loader is None:
    raise ValueError(f"{path}: not a Python config file; expected configs/<task>.py")
  module = importlib.util.module_from_spec(spec)
  # Config files share helpers in their own folder (`import common`): put it first on the path
  # while this one runs, and forget those helpers afterwards so another folder's copy can load.
  folder = os.path.dirname(os.path.abspath(path))
  before = set(sys.modules)
  sys.path.insert(0, folder)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ValueError(
      f"{path}: line {e.lineno}: Python syntax error in the config: {e.msg}"
    ) from None
  except UnicodeDecodeError:
    raise ValueError(f"{path}: not UTF-8 text; expected a Python config file") from None
  finally:
    sys.path.remove(folder)
    for name in set(sys.modules) - before:
      if (
        os.path.dirname(os.path.abspath(getattr(sys.modules[name], "__file__", None) or ""))
        == folder
      ):
        del sys.modules[name]
  if not callable(getattr(module, "get_config", None)):
    raise ValueError(
      f"{path}: defines no get_config(arg); expected a config file like configs/occlusion.py"
    )
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


def apply_overrides(
  config: ml_collections.ConfigDict, overrides: Sequence[str]
) -> ml_collections.ConfigDict:
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
        raise ValueError(f"Unknown config field {'.'.join(parts[: i + 1])!r} (in override {ov!r})")
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
  "fsdp_min_size": 2**12,  # leaves smaller than this (elements) stay replicated
  "checkpoint_every": 100,
  "keep_checkpoints": 2,
  "async_checkpoints": True,
  "log_every": 10,
  "progress_every_seconds": 10.0,  # wall-clock interval of the `[train] step ...` lines
  "check_finite_every": 0,  # 0 = at log steps (and checkpoint steps): no per-step host sync
  "preemption_sync_every": 10,  # multi-process runs agree on SIGTERM this often
  # Mixed precision (relations/train/precision.py): auto = bfloat16 compute on accelerators,
  # float32 on CPU; parameters and optimizer state are float32 either way.
  "compute_dtype": "auto",
  "remat": False,  # recompute each transformer block (ViT, GPT-2) in the backward pass
  # Persistent XLA compilation cache: a restart of the same config on the same devices loads its
  # compiled steps instead of recompiling. "" = $JAX_COMPILATION_CACHE_DIR if set (the launch
  # scripts set it), else off.
  "compilation_cache_dir": "",
  "eval_errors_fatal": False,  # a failing evaluation is logged and training goes on
  "tensorboard": True,  # TensorBoard event files in the workdir (else metrics are only logged)
  # relations/train/perf.py: per-device peak TFLOP/s for MFU (0 = by device kind; none on CPU),
  # and "S:E" = a jax.profiler trace of steps S..E into <workdir>/profile ("" = none).
  "peak_tflops": 0.0,
  "profile_steps": "",
}


# Fields every trainer run reads that must be positive integers (`check_config`).
_POSITIVE_INTS = (
  "total_steps",
  "input.batch_size",
  "grad_accum_steps",
  "checkpoint_every",
  "keep_checkpoints",
  "log_every",
  "preemption_sync_every",
)
_NON_NEGATIVE = (
  "schedule.lr",
  "schedule.warmup_steps",
  "optax.weight_decay",
  "optax.clip_norm",
  "fsdp_min_size",
  "progress_every_seconds",
  "check_finite_every",
  "peak_tflops",
)


def parse_profile_steps(spec: str) -> tuple[int, int] | None:
  """ "S:E" -> (S, E) with 0 <= S < E; "" -> None.

  Raises:
    ValueError: naming the config field `profile_steps` and the value.
  """
  spec = str(spec or "").strip()
  if not spec:
    return None
  try:
    a, b = (int(x) for x in spec.split(":"))
  except ValueError:
    raise ValueError(
      f"config field 'profile_steps': expected 'START:END' (e.g. '10:15'), got {spec!r}"
    ) from None
  if not 0 <= a < b:
    raise ValueError(f"config field 'profile_steps': expected 0 <= START < END, got {spec!r}")
  return a, b


def _get(config, dotted: str):
  node = config
  for part in dotted.split("."):
    if not isinstance(node, (dict, ml_collections.ConfigDict)) or part not in node:
      return None
    node = node[part]
  return node


def check_config(config: ml_collections.ConfigDict) -> None:
  """Refuses values no run can use, before anything is built or written.

  Checks the trainer's own fields (`_POSITIVE_INTS` > 0, `_NON_NEGATIVE` >= 0, an integer
  `seed`, `evals.*.every_steps` >= 0, a batch divisible by `grad_accum_steps`) and that no
  float anywhere in the config is NaN or infinite.

  Raises:
    ValueError: naming the field, the value and what is expected.
  """

  def walk(node, prefix):
    for k, v in node.items():
      key = f"{prefix}{k}"
      if isinstance(v, (dict, ml_collections.ConfigDict)):
        walk(v, key + ".")
      elif isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"config field {key!r}: expected a finite number, got {v}")

  walk(config, "")
  for key in _POSITIVE_INTS:
    v = _get(config, key)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
      raise ValueError(f"config field {key!r}: expected a positive integer, got {v!r}")
  for key in _NON_NEGATIVE:
    v = _get(config, key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
      raise ValueError(f"config field {key!r}: expected a number >= 0, got {v!r}")
  seed = _get(config, "seed")
  if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
    raise ValueError(f"config field 'seed': expected an integer, got {seed!r}")
  for name, ev in (_get(config, "evals") or {}).items():
    every = ev.get("every_steps", 0) if hasattr(ev, "get") else 0
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
      raise ValueError(
        f"config field 'evals.{name}.every_steps': expected an integer >= 0, got {every!r}"
      )
  dtype = _get(config, "compute_dtype")
  if dtype is not None and dtype not in ("auto", "bfloat16", "float32", "float16"):
    raise ValueError(
      f"config field 'compute_dtype': expected auto, bfloat16, float32 or float16, got {dtype!r}"
    )
  parse_profile_steps(_get(config, "profile_steps") or "")
  bs, accum = _get(config, "input.batch_size"), _get(config, "grad_accum_steps")
  if isinstance(bs, int) and isinstance(accum, int) and accum > 0 and bs % accum:
    raise ValueError(
      f"config field 'input.batch_size': {bs} is not divisible by grad_accum_steps={accum}"
    )


def load_config(spec: str, overrides: Sequence[str] = ()) -> ml_collections.ConfigDict:
  """Loads `path/to/config.py[:arg]`, adds missing `TRAINER_DEFAULTS`, locks it, applies
  `field=value` overrides and checks the result (`check_config`).

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
      raise FileNotFoundError(f"{path}: no such config file (e.g. configs/occlusion.py:tiny)")
  module = _load_module(path)
  config = module.get_config(arg or None)
  with config.unlocked():
    for key, value in TRAINER_DEFAULTS.items():
      if key not in config:
        config[key] = value
  config.lock()
  config = apply_overrides(config, overrides)
  check_config(config)
  return config
