"""Pretrained ViT backbones into the shared ViT (`relations.nn.vit`).

Formats (`load(params, path)` picks by path):
  * big_vision `.npz` (flat '/'-joined keys): big_vision's own layout (`pos_embedding` [1, N, D]
    without a CLS position, `encoderblock_<i>/MultiHeadDotProductAttention_0`, ...) and the older
    vision_transformer / AugReg layout (`Transformer/posembed_input/pos_embedding` with a CLS
    position, `MultiHeadDotProductAttention_1`, `LayerNorm_2`, `MlpBlock_3`). Images in [-1, 1].
  * Hugging Face `model.safetensors` + `config.json` (a directory, or the .safetensors file with
    config.json next to it), written by `save_pretrained` or downloaded from the hub:
      model_type "vit"                 ViTModel (also ViTForImageClassification's `vit.` keys)
      model_type "dinov2"              Dinov2Model (layer scale, patch 14)
      model_type "clip_vision_model"   CLIPVisionModel (pre-LN `pre_layrnorm`, quick-GELU)
      model_type "clip"                CLIPModel (its vision tower; the text tower is unused)

How the architectures map onto the shared ViT (`hf_vit_kwargs` returns the kwargs):
  * The CLS token's position embedding is added to the CLS token itself (our ViT gives the CLS no
    position), which is exact since both are constants; big_vision does the same on load.
  * Position embeddings are resampled bilinearly from the checkpoint's grid to the model's
    `posemb_grid` (and, at call time, to the input's grid).
  * Hugging Face models expect `(x01 - mean) / std` pixels; the tasks feed x in [-1, 1]. The
    normalisation is folded into the patch embedding (kernel / (2 std), bias + kernel . (0.5 -
    mean) / std), with mean/std from the checkpoint's `preprocessor_config.json` if present, else
    the family's published values. CLIP's bias-free patch embedding gets that folded bias.
  * CLIP applies `post_layernorm` to the pooled CLS token only; here it is the final LayerNorm
    (`encoder_norm`) of every token, which is what dense heads want. The residual stream before
    it (`out["block<depth-1>"]`) equals CLIP's `last_hidden_state`.

Every load returns a `Report`: the model parameters it did not fill and the checkpoint tensors it
did not use. A tensor whose shape does not fit is an error naming it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from relations.nn import vit

# Published preprocessing of each family (pixel mean / std on [0, 1] images).
_NORM = {
  "vit": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
  "dinov2": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
  "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
}
_ACT = {
  "gelu": "gelu",
  "gelu_new": "gelu_tanh",
  "gelu_pytorch_tanh": "gelu_tanh",
  "quick_gelu": "quick_gelu",
}


@dataclasses.dataclass
class Report:
  """What a load did: `unfilled` model parameters kept their init, `unused` checkpoint tensors."""

  path: str
  family: str
  filled: list[str]
  unfilled: list[str]
  unused: list[str]

  def summary(self) -> str:
    return (
      f"{self.path} ({self.family}): filled {len(self.filled)} parameters; "
      f"not filled ({len(self.unfilled)}): {self.unfilled}; "
      f"checkpoint tensors not used ({len(self.unused)}): {self.unused}"
    )


# ---------------------------------------------------------------- reading files
def _hf_paths(path: str) -> tuple[str, str]:
  if os.path.isdir(path):
    weights, cfg = os.path.join(path, "model.safetensors"), os.path.join(path, "config.json")
  else:
    weights, cfg = path, os.path.join(os.path.dirname(path), "config.json")
  for p in (weights, cfg):
    if not os.path.exists(p):
      raise FileNotFoundError(
        f"{p}: missing (a Hugging Face checkpoint is model.safetensors with its config.json)"
      )
  return weights, cfg


def read_hf_config(path: str) -> dict[str, Any]:
  """The vision config of a HF checkpoint dir (or .safetensors path), with `model_type`."""
  _, cfg_path = _hf_paths(path)
  with open(cfg_path) as f:
    cfg = json.load(f)
  if cfg.get("model_type") == "clip":
    cfg = {**cfg.get("vision_config", {}), "model_type": "clip", "_tower": "vision_model."}
  if cfg.get("model_type") not in ("vit", "dinov2", "clip_vision_model", "clip"):
    raise ValueError(
      f"{cfg_path}: model_type {cfg.get('model_type')!r} is not a supported ViT "
      "(vit, dinov2, clip_vision_model, clip)"
    )
  return cfg


def _family(cfg) -> str:
  return {"vit": "vit", "dinov2": "dinov2"}.get(cfg["model_type"], "clip")


def hf_vit_kwargs(path: str) -> dict[str, Any]:
  """`vit.Model` kwargs (sizes and architecture switches) matching a HF checkpoint."""
  cfg = read_hf_config(path)
  fam = _family(cfg)
  act = cfg.get("hidden_act", "gelu")
  if act not in _ACT:
    raise ValueError(f"{path}: hidden_act {act!r} not supported ({sorted(_ACT)})")
  if cfg.get("use_swiglu_ffn"):
    raise ValueError(f"{path}: DINOv2 with a SwiGLU MLP (giant) is not supported")
  width = int(cfg["hidden_size"])
  return dict(
    width=width,
    depth=int(cfg["num_hidden_layers"]),
    mlp_dim=int(cfg.get("intermediate_size") or width * cfg.get("mlp_ratio", 4)),
    num_heads=int(cfg["num_attention_heads"]),
    patch_size=int(cfg["patch_size"]),
    pool_type="tok",
    mlp_act=_ACT[act],
    ln_eps=float(cfg.get("layer_norm_eps", 1e-12 if fam == "vit" else 1e-6)),
    layer_scale=fam == "dinov2",
    pre_norm=fam == "clip",
  )


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top

  out = {}
  with safe_open(path, framework="np") as f:
    for key in f.keys():
      try:
        out[key] = np.asarray(f.get_tensor(key), np.float32)
      except TypeError as e:  # bfloat16: numpy has no such dtype
        raise ValueError(
          f"{path}: tensor {key!r} has an unsupported dtype ({e}); save the checkpoint in float32"
        ) from None
  return out


def _normalisation(path: str, fam: str):
  mean, std = _NORM[fam]
  pp = os.path.join(
    path if os.path.isdir(path) else os.path.dirname(path), "preprocessor_config.json"
  )
  if os.path.exists(pp):
    with open(pp) as f:
      d = json.load(f)
    mean, std = d.get("image_mean", mean), d.get("image_std", std)
  return np.asarray(mean, np.float64), np.asarray(std, np.float64)


# ---------------------------------------------------------------- HF -> big_vision names
def _hf_to_ours(ckpt: dict[str, np.ndarray], cfg, path: str):
  """Renames/reshapes HF tensors to our flat keys.

  Returns (ours, sources): `sources[our_key]` lists the checkpoint tensors it was made from.
  """
  fam = _family(cfg)
  heads = int(cfg["num_attention_heads"])
  prefix = cfg.get("_tower", "")
  t = {}
  for k, v in ckpt.items():
    k2 = k[len(prefix) :] if prefix and k.startswith(prefix) else k
    k2 = re.sub(r"^(vit|dinov2|vision_model)\.", "", k2)
    t[k2] = (k, v)
  out, sources, pending = {}, {}, []

  def take(name):
    if name not in t:
      return None
    pending.append(t[name][0])
    return t[name][1]

  def put(dst, value):
    out[dst] = value
    sources[dst] = list(pending)

  def dense(src, dst, split_heads=None):
    pending.clear()
    w, b = take(src + ".weight"), t.get(src + ".bias", (None, None))[1]
    if w is None:
      return
    k = w.T  # torch Linear [out, in] -> [in, out]
    if split_heads == "in":  # q/k/v: [D, H, hd]
      k = k.reshape(k.shape[0], heads, -1)
      b = None if b is None else b.reshape(heads, -1)
    elif split_heads == "out":  # output projection: [H, hd, D]
      k = k.reshape(heads, -1, k.shape[-1])
    put(dst + "/kernel", k)
    pending.clear()
    if b is not None:
      take(src + ".bias")
      put(dst + "/bias", b)
    pending.clear()

  def norm(src, dst):
    pending.clear()
    w = take(src + ".weight")
    if w is not None:
      put(dst + "/scale", w)
    pending.clear()
    b = take(src + ".bias")
    if b is not None:
      put(dst + "/bias", b)
    pending.clear()

  if fam == "clip":
    names = (
      "embeddings.class_embedding",
      "embeddings.position_embedding.weight",
      "embeddings.patch_embedding.weight",
      "embeddings.patch_embedding.bias",
    )
    norm("pre_layrnorm", "pre_norm")
    norm("post_layernorm", "Transformer/encoder_norm")
  else:
    names = (
      "embeddings.cls_token",
      "embeddings.position_embeddings",
      "embeddings.patch_embeddings.projection.weight",
      "embeddings.patch_embeddings.projection.bias",
    )
    norm("layernorm", "Transformer/encoder_norm")
  for name in names[:3]:
    if name not in t:
      raise ValueError(f"{path}: no tensor {name!r} in a {fam} checkpoint (is it a vision model?)")
  cls, pos, patch_w, patch_b = (t[n][1] if n in t else None for n in names)
  cls, pos = cls.reshape(1, 1, -1), pos.reshape(1, -1, pos.shape[-1])
  # Fold the CLS position into the CLS token; the rest is the patch grid.
  pending[:] = [t[names[0]][0], t[names[1]][0]]
  put("cls", cls + pos[:, :1])
  pending[:] = [t[names[1]][0]]
  put("pos_embedding", pos[:, 1:])
  # Fold the pixel normalisation into the patch embedding: our pixels are x in [-1, 1].
  mean, std = _normalisation(path, fam)
  w = patch_w.astype(np.float64)  # [D, 3, p, p]
  b = np.zeros(w.shape[0]) if patch_b is None else patch_b.astype(np.float64)
  b = b + np.einsum("dcij,c->d", w, (0.5 - mean) / std)
  w = w / (2 * std)[None, :, None, None]
  pending[:] = [t[names[2]][0]]
  put("embedding/kernel", w.transpose(2, 3, 1, 0).astype(np.float32))
  pending[:] = [t[n][0] for n in names[2:] if n in t]
  put("embedding/bias", b.astype(np.float32))
  pending.clear()

  for i in range(int(cfg["num_hidden_layers"])):
    ours = f"Transformer/encoderblock_{i}"
    if fam == "clip":
      src = f"encoder.layers.{i}"
      norm(f"{src}.layer_norm1", f"{ours}/LayerNorm_0")
      norm(f"{src}.layer_norm2", f"{ours}/LayerNorm_1")
      for a, o in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")):
        dense(f"{src}.self_attn.{a}", f"{ours}/MultiHeadDotProductAttention_0/{o}", "in")
      dense(f"{src}.self_attn.out_proj", f"{ours}/MultiHeadDotProductAttention_0/out", "out")
      dense(f"{src}.mlp.fc1", f"{ours}/MlpBlock_0/Dense_0")
      dense(f"{src}.mlp.fc2", f"{ours}/MlpBlock_0/Dense_1")
      continue
    src = f"encoder.layer.{i}"
    for a, o in (("query", "query"), ("key", "key"), ("value", "value")):
      dense(f"{src}.attention.attention.{a}", f"{ours}/MultiHeadDotProductAttention_0/{o}", "in")
    dense(f"{src}.attention.output.dense", f"{ours}/MultiHeadDotProductAttention_0/out", "out")
    if fam == "vit":
      norm(f"{src}.layernorm_before", f"{ours}/LayerNorm_0")
      norm(f"{src}.layernorm_after", f"{ours}/LayerNorm_1")
      dense(f"{src}.intermediate.dense", f"{ours}/MlpBlock_0/Dense_0")
      dense(f"{src}.output.dense", f"{ours}/MlpBlock_0/Dense_1")
    else:
      norm(f"{src}.norm1", f"{ours}/LayerNorm_0")
      norm(f"{src}.norm2", f"{ours}/LayerNorm_1")
      dense(f"{src}.mlp.fc1", f"{ours}/MlpBlock_0/Dense_0")
      dense(f"{src}.mlp.fc2", f"{ours}/MlpBlock_0/Dense_1")
      for j in (1, 2):
        pending.clear()
        ls = take(f"{src}.layer_scale{j}.lambda1")
        if ls is not None:
          put(f"{ours}/ls{j}", ls)
  return out, sources


# ---------------------------------------------------------------- big_vision names
def _fix_old_big_vision(ckpt: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """vision_transformer / AugReg layout -> big_vision's (as big_vision's own loader does)."""
  out = {}
  for k, v in ckpt.items():
    k = k.replace("Transformer/posembed_input/pos_embedding", "pos_embedding")
    k = re.sub(r"MultiHeadDotProductAttention_1/", "MultiHeadDotProductAttention_0/", k)
    k = re.sub(r"/LayerNorm_2/", "/LayerNorm_1/", k)
    k = re.sub(r"/MlpBlock_3/", "/MlpBlock_0/", k)
    out[k] = v
  pe = out.get("pos_embedding")
  if pe is not None and "cls" in out and pe.ndim == 3:
    side = int(round(np.sqrt(pe.shape[1] - 1)))
    if side * side == pe.shape[1] - 1:  # a CLS position: fold it into the token
      out["cls"] = out["cls"] + pe[:, :1]
      out["pos_embedding"] = pe[:, 1:]
  return out


# ---------------------------------------------------------------- load
def _grid(v: np.ndarray, key: str, path: str) -> np.ndarray:
  if v.ndim == 4:
    return v
  side = int(round(np.sqrt(v.shape[1])))
  if side * side != v.shape[1]:
    raise ValueError(f"{path}: {key} with {v.shape[1]} tokens is not a square grid")
  return v.reshape(1, side, side, v.shape[-1])


def load(params: dict, path: str) -> tuple[dict, Report]:
  """Loads a ViT checkpoint (big_vision .npz or HF safetensors) into shared-ViT `params`.

  Args:
    params: the initialised params of one `vit.Model` (target structure, shapes and the values
      kept for anything the checkpoint does not have).
    path: `.npz` file, or a HF checkpoint directory / `model.safetensors` with `config.json`.

  Returns:
    `(new_params, report)`.

  Raises:
    ValueError: a checkpoint tensor whose shape does not fit the model (named), or a file that is
      not a ViT checkpoint.
  """
  if path.endswith(".npz"):
    with np.load(path, allow_pickle=False) as f:
      raw = {k: f[k] for k in f.files}
    strip = {re.sub(r"^(params/)?(img/)?", "", k): k for k in raw}
    theirs = _fix_old_big_vision({s: raw[k] for s, k in strip.items()})
    family = "big_vision"
    # The renames keep the keys' order, so each of ours maps back to the file's key.
    sources = {ours_k: [k] for ours_k, k in zip(theirs, strip.values())}
    if "cls" in sources and "pos_embedding" in sources:
      sources["cls"] = sources["cls"] + sources["pos_embedding"]
  else:
    weights, _ = _hf_paths(path)
    cfg = read_hf_config(path)
    family = f"hf:{cfg['model_type']}"
    raw = _read_safetensors(weights)
    theirs, sources = _hf_to_ours(raw, cfg, path)
  used_src = set()
  ours = vit.flatten_params(jax.tree.map(np.asarray, params))
  new, filled = dict(ours), []
  for key, v in theirs.items():
    if key not in ours:
      continue
    target = ours[key]
    if key == "pos_embedding":
      v = _grid(v, key, path)
      if tuple(v.shape[1:3]) != tuple(target.shape[1:3]) and v.shape[-1] == target.shape[-1]:
        v = np.asarray(vit.resample_posemb(jnp.asarray(v, jnp.float32), target.shape[1:3]))
    if tuple(v.shape) != tuple(target.shape):
      name = sources[key][0]
      raise ValueError(
        f"{path}: tensor {name!r} has shape {tuple(v.shape)}, the model's "
        f"{key!r} is {tuple(target.shape)}"
      )
    new[key] = np.asarray(v, target.dtype)
    filled.append(key)
    used_src.update(sources[key])
  all_src = set(raw)
  report = Report(
    path=path,
    family=family,
    filled=sorted(filled),
    unfilled=sorted(set(ours) - set(filled)),
    unused=sorted(all_src - used_src),
  )
  return jax.tree.map(jnp.asarray, vit.unflatten_params(new)), report


def _get_sub(tree, prefix):
  for p in prefix:
    tree = tree[p]
  return tree


def _set_sub(tree, prefix, sub):
  if not prefix:
    return sub
  out = dict(tree)
  out[prefix[0]] = _set_sub(tree[prefix[0]], prefix[1:], sub)
  return out


def check_architecture(vit_kw: dict[str, Any], path: str) -> None:
  """Raises if a model's ViT kwargs differ from what a HF checkpoint needs (no-op for .npz).

  Sizes are also checked tensor by tensor on load; this catches what shapes cannot show
  (activation, LayerNorm epsilon, CLS token, pre-norm).
  """
  if path.endswith(".npz"):
    return
  want = hf_vit_kwargs(path)
  have = {
    **vit.decode_variant(vit_kw.get("variant")),
    **{k: v for k, v in vit_kw.items() if k != "variant"},
  }
  defaults = {f.name: f.default for f in dataclasses.fields(vit._ViT)}  # pylint: disable=protected-access
  bad = []
  for k, v in want.items():
    got = have.get(k, defaults.get(k))
    if abs(float(got) - float(v)) > 1e-15 * max(abs(v), 1) if isinstance(v, float) else got != v:
      bad.append(f"model.vit.{k}={v!r} (config has {got!r})")
  if bad:
    raise ValueError(
      f"{path}: the config's ViT does not match the checkpoint; set " + ", ".join(bad)
    )


def load_into(params: dict, path: str, prefix: tuple[str, ...], log=None) -> dict:
  """`load` applied to the ViT sub-tree `params[prefix[0]][prefix[1]]...`; logs the report."""
  sub, report = load(_get_sub(params, prefix), path)
  if log is not None:
    log("Backbone import: %s", report.summary())
  return _set_sub(params, prefix, sub)


# ---------------------------------------------------------------- backbones named by configs
# `configs/<task>.py:...,backbone=<name>` sets `model.vit` from here and names the checkpoint the
# paper setup starts from; `model.init_from` is the local path of that download.
BACKBONES = {
  "augreg_b16": dict(
    vit=dict(variant="B/16", pool_type="tok"),
    checkpoint="AugReg ViT-B/16, ImageNet-21k (big_vision .npz)",
    url="gs://vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
  ),
  "dinov2_b14": dict(
    vit=dict(variant="B/14", pool_type="tok", mlp_act="gelu", ln_eps=1e-6, layer_scale=True),
    checkpoint="DINOv2 ViT-B/14 (Hugging Face facebook/dinov2-base)",
    url="https://huggingface.co/facebook/dinov2-base",
  ),
  "clip_b16": dict(
    vit=dict(variant="B/16", pool_type="tok", mlp_act="quick_gelu", ln_eps=1e-5, pre_norm=True),
    checkpoint="CLIP ViT-B/16 vision tower (Hugging Face openai/clip-vit-base-patch16)",
    url="https://huggingface.co/openai/clip-vit-base-patch16",
  ),
}


def load_backbone(model_config, params: dict, prefix: tuple[str, ...]) -> dict:
  """A task's `load_pretrained` body: imports `model_config.init_from` into the ViT at `prefix`.

  Args:
    model_config: the config's `model` (reads `init_from`, `backbone`, `vit`, `vit_variant`).
    params: the task model's freshly initialised params.
    prefix: where the ViT's params live in them (e.g. ("vit",)).

  Returns:
    `params` itself when there is nothing to import (then, for a config that names a pretrained
    `backbone`, a warning says the backbone is random), else the new params.
  """
  from absl import logging  # pylint: disable=g-import-not-at-top

  path = model_config.get("init_from") or ""
  backbone = model_config.get("backbone") or ""
  if not path:
    if backbone:
      b = BACKBONES[backbone]
      logging.warning(
        "model.init_from is empty: the ViT backbone starts from RANDOM weights. The paper "
        "setup starts from %s; download %s and pass --config.model.init_from=<local path>.",
        b["checkpoint"],
        b["url"],
      )
    return params
  from relations import remote_inputs  # pylint: disable=g-import-not-at-top

  # A gs:// checkpoint (a pod's workers have no shared disk) is read from a local copy; a HF
  # model.safetensors brings the json files its reader looks for next to it.
  path = remote_inputs.local_copy(path, siblings=("config.json", "preprocessor_config.json"))
  vit_kw = dict(model_config.get("vit") or {})
  if model_config.get("vit_variant"):
    vit_kw["variant"] = model_config.vit_variant
  check_architecture(vit_kw, path)
  return load_into(params, path, prefix, log=logging.info)
