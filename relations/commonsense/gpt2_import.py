"""Imports Hugging Face GPT-2 weights (`model.safetensors`) into `gpt2.GPT2`.

Usage:
  cfg = gpt2_import.read_hf_config("/path/to/gpt2")      # sizes from config.json
  lm = gpt2.GPT2(**cfg, vocab_size=gpt2.VISUALCOMET_VOCAB)
  init = lm.init(rng, tokens)["params"]
  params = gpt2_import.load(init, "/path/to/gpt2/model.safetensors")

Both key spellings are accepted: OpenAI's hub file (`h.0.attn.c_attn.weight`,
`wte.weight`, plus `attn.bias` mask buffers, which are ignored) and what
`GPT2LMHeadModel.save_pretrained` writes (`transformer.` prefix, optional
`lm_head.weight`, which must equal `wte` because the head is tied).

Hugging Face's `Conv1D` stores kernels as [in, out] and computes x @ W, as
`nn.Dense` does, so kernels are only split (q/k/v) and reshaped to heads.

Vocabulary resizing: when the model has more rows than the file (50,257 ->
50,317 for the VisualCOMET special tokens) the extra rows are drawn
from N(0, 0.02) with a seeded numpy generator, as `resize_token_embeddings`
does. A model with fewer rows than the file is an error.
"""

from __future__ import annotations

import json
import os
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from safetensors import safe_open


def read_hf_config(model_dir: str) -> dict[str, Any]:
  """Reads `config.json` of a HF GPT-2 dir into `gpt2.GPT2` keyword args."""
  path = os.path.join(model_dir, "config.json")
  try:
    with open(path) as f:
      cfg = json.load(f)
  except FileNotFoundError:
    raise FileNotFoundError(
      f"{path}: missing; GPT-2 import needs the HF config.json next to model.safetensors"
    ) from None
  try:
    return dict(
      num_layers=int(cfg["n_layer"]),
      width=int(cfg["n_embd"]),
      num_heads=int(cfg["n_head"]),
      max_len=int(cfg["n_positions"]),
      ln_eps=float(cfg.get("layer_norm_epsilon", 1e-5)),
      mlp_dim=int(cfg.get("n_inner") or 4 * int(cfg["n_embd"])),
    )
  except KeyError as e:
    raise ValueError(f"{path}: field {e.args[0]!r} missing") from None


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """All tensors of a safetensors file as float32 numpy arrays, prefix-free."""
  out = {}
  try:
    f = safe_open(path, framework="np")
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: no such safetensors file") from None
  with f:
    for key in f.keys():
      name = key[len("transformer.") :] if key.startswith("transformer.") else key
      try:
        out[name] = np.asarray(f.get_tensor(key), np.float32)
      except TypeError as e:  # e.g. bfloat16, which numpy cannot hold
        raise ValueError(
          f"{path}: tensor {key!r} has an unsupported dtype ({e}); save the checkpoint in float32"
        ) from None
  return out


def _get(tensors, path, key, shape=None):
  if key not in tensors:
    raise KeyError(f"{path}: tensor {key!r} missing (have e.g. {sorted(tensors)[:5]})")
  t = tensors[key]
  if shape is not None and tuple(t.shape) != tuple(shape):
    raise ValueError(f"{path}: tensor {key!r} has shape {t.shape}, expected {tuple(shape)}")
  return t


def convert(
  tensors: dict[str, np.ndarray],
  *,
  num_heads: int,
  vocab_size: int,
  seed: int = 0,
  path: str = "<tensors>",
) -> dict[str, Any]:
  """HF GPT-2 tensors -> our nested params dict (plain numpy arrays).

  Args:
    tensors: prefix-free HF names -> arrays (see `read_safetensors`).
    num_heads: attention heads (not recoverable from shapes).
    vocab_size: rows of our embedding; >= the file's vocabulary.
    seed: seed of the N(0, 0.02) draw for added vocabulary rows.
    path: file name for error messages.

  Returns:
    {"wte": {"embedding"}, "wpe": {...}, "h_<i>": {...}, "ln_f": {...}}.
  """
  wte = _get(tensors, path, "wte.weight")
  v_file, d = wte.shape
  if vocab_size < v_file:
    raise ValueError(f"{path}: file vocabulary {v_file} is larger than the model's {vocab_size}")
  if vocab_size > v_file:
    extra = (
      np.random.default_rng(seed).normal(0.0, 0.02, (vocab_size - v_file, d)).astype(np.float32)
    )
    wte = np.concatenate([wte, extra], 0)
  if "lm_head.weight" in tensors:
    head = tensors["lm_head.weight"]
    if head.shape != (v_file, d) or not np.array_equal(head, wte[:v_file]):
      raise ValueError(
        f"{path}: lm_head.weight differs from wte.weight; only tied GPT-2 heads are supported"
      )
  if d % num_heads:
    raise ValueError(f"{path}: width {d} not divisible by {num_heads} heads")
  h, dh = num_heads, d // num_heads
  layers = sorted({int(k.split(".")[1]) for k in tensors if k.startswith("h.")})
  if layers != list(range(len(layers))):
    raise ValueError(f"{path}: non-contiguous layer indices {layers}")
  ln = lambda p: {
    "scale": _get(tensors, path, p + ".weight", (d,)),  # pylint: disable=g-long-lambda
    "bias": _get(tensors, path, p + ".bias", (d,)),
  }
  params = {
    "wte": {"embedding": wte},
    "wpe": {"embedding": _get(tensors, path, "wpe.weight")},
    "ln_f": ln("ln_f"),
  }
  for i in layers:
    p = f"h.{i}."
    qkv_w = _get(tensors, path, p + "attn.c_attn.weight", (d, 3 * d))
    qkv_b = _get(tensors, path, p + "attn.c_attn.bias", (3 * d,))
    attn = {}
    for j, name in enumerate(("query", "key", "value")):
      attn[name] = {
        "kernel": qkv_w[:, j * d : (j + 1) * d].reshape(d, h, dh),
        "bias": qkv_b[j * d : (j + 1) * d].reshape(h, dh),
      }
    attn["out"] = {
      "kernel": _get(tensors, path, p + "attn.c_proj.weight", (d, d)).reshape(h, dh, d),
      "bias": _get(tensors, path, p + "attn.c_proj.bias", (d,)),
    }
    fc_w = _get(tensors, path, p + "mlp.c_fc.weight")
    mlp = {
      "c_fc": {"kernel": fc_w, "bias": _get(tensors, path, p + "mlp.c_fc.bias", (fc_w.shape[1],))},
      "c_proj": {
        "kernel": _get(tensors, path, p + "mlp.c_proj.weight", (fc_w.shape[1], d)),
        "bias": _get(tensors, path, p + "mlp.c_proj.bias", (d,)),
      },
    }
    params[f"h_{i}"] = {"ln_1": ln(p + "ln_1"), "attn": attn, "ln_2": ln(p + "ln_2"), "mlp": mlp}
  return params


def _is_box(x):
  return isinstance(x, nn.meta.AxisMetadata)


def load(
  init_params: Any,
  path: str,
  *,
  num_heads: int | None = None,
  seed: int = 0,
  prefix: tuple[str, ...] = (),
) -> Any:
  """Returns `init_params` with the GPT-2 subtree replaced by the file's weights.

  Args:
    init_params: params of a model containing a `gpt2.GPT2` (boxed with
      logical names or plain); shapes are checked against it.
    path: a `model.safetensors` file (config.json next to it gives num_heads).
    num_heads: overrides config.json.
    seed: seed for added vocabulary rows.
    prefix: path of the GPT2 submodule inside `init_params` (e.g. ("lm",)).

  Returns:
    A tree with the structure (and boxing) of `init_params`.
  """
  if num_heads is None:
    num_heads = read_hf_config(os.path.dirname(path))["num_heads"]
  sub = init_params
  for k in prefix:
    sub = sub[k]
  vocab = nn.meta.unbox(sub["wte"]["embedding"]).shape[0]
  new = convert(read_safetensors(path), num_heads=num_heads, vocab_size=vocab, seed=seed, path=path)
  flat_old = {
    jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(sub, is_leaf=_is_box)
  }
  flat_new = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(new)}
  if set(flat_old) != set(flat_new):
    raise ValueError(
      f"{path}: parameter names differ from the model: missing "
      f"{sorted(set(flat_old) - set(flat_new))[:5]}, unexpected "
      f"{sorted(set(flat_new) - set(flat_old))[:5]}"
    )

  def replace(kpath, old):
    key = jax.tree_util.keystr(kpath)
    val = flat_new[key]
    raw = nn.meta.unbox(old) if _is_box(old) else old
    if tuple(raw.shape) != tuple(val.shape):
      raise ValueError(f"{path}: {key} has shape {val.shape} in the file, {raw.shape} in the model")
    val = np.asarray(val, raw.dtype)
    return old.replace_boxed(val) if _is_box(old) else val

  sub_new = jax.tree_util.tree_map_with_path(replace, sub, is_leaf=_is_box)
  if not prefix:
    return sub_new
  out = dict(init_params)
  node = out
  for k in prefix[:-1]:
    node[k] = dict(node[k])
    node = node[k]
  node[prefix[-1]] = sub_new
  return out
