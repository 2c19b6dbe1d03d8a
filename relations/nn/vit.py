"""Shared Vision Transformer encoder (pre-LN), used by the occlusion and relation models.

Usage:
  model = vit.Model(variant="Ti/16")            # or width=..., depth=..., ...
  params = model.init(rng, images)["params"]
  pooled, out = model.apply({"params": params}, images, train=False)

Inputs: `images` [B, H, W, 3] float32, roughly in [-1, 1]; H and W must be multiples of the patch size.
Outputs: `pooled` [B, D] (mean over patch tokens, or the CLS token with pool_type="tok") and a dict
`out` with
  out["encoded"]     [B, N, D]           patch tokens after the final LayerNorm (N = H/p * W/p)
  out["patch_grid"]  [B, H/p, W/p, D]    the same tokens laid out on the patch grid (dense heads)
  out["block<i>"]    [B, N(+1), D]       residual stream after block i (for probes / multi-level heads)

Position embeddings are learned for a reference grid (`posemb_grid`) and bilinearly resampled to the
input's grid at call time, so a model trained at one resolution runs at another.

Architecture switches for pretrained backbones (`mlp_act`, `ln_eps`, `layer_scale`, `pre_norm`)
cover Hugging Face ViT, DINOv2 and CLIP vision towers; `relations.nn.vit_import` reads those
checkpoints (and big_vision / AugReg `.npz`) with a report of what was and was not filled.

`load(params, path)` reads a big_vision-format `.npz` checkpoint from a local path (keys such as
`embedding/kernel`, `Transformer/encoderblock_0/MlpBlock_0/Dense_0/kernel`, `pos_embedding`), resamples
the position embedding to this model's grid and returns the new params.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

# (width, depth, mlp_dim, heads) by size name, as in the ViT paper (plus Ti/S from DeiT and a
# "mu" size for CPU tests).
_SIZES = {
  "mu": (32, 2, 64, 2),
  "Ti": (192, 12, 768, 3),
  "S": (384, 12, 1536, 6),
  "M": (512, 12, 2048, 8),
  "B": (768, 12, 3072, 12),
  "L": (1024, 24, 4096, 16),
  "H": (1280, 32, 5120, 16),
}


def decode_variant(variant: str | None) -> dict[str, Any]:
  """'B/16' -> dict(width=768, depth=12, mlp_dim=3072, num_heads=12, patch_size=16)."""
  if variant is None:
    return {}
  m = re.fullmatch(r"(\w+)/(\d+)", variant)
  if not m or m.group(1) not in _SIZES:
    raise ValueError(
      f"Unknown ViT variant {variant!r}; expected <size>/<patch> with size in {sorted(_SIZES)}"
    )
  width, depth, mlp_dim, heads = _SIZES[m.group(1)]
  return dict(
    width=width, depth=depth, mlp_dim=mlp_dim, num_heads=heads, patch_size=int(m.group(2))
  )


def resample_posemb(posemb: jax.Array, new_hw: Sequence[int]) -> jax.Array:
  """Bilinearly resamples a [1, h, w, D] grid of position embeddings to [1, H, W, D]."""
  if tuple(posemb.shape[1:3]) == tuple(new_hw):
    return posemb
  return jax.image.resize(posemb, (1, *new_hw, posemb.shape[-1]), method="bilinear")


def activation(name: str):
  """The MLP nonlinearity by name: big_vision's tanh-approximated GELU ("gelu_tanh"), the exact
  erf GELU of Hugging Face ViT / DINOv2 ("gelu"), or CLIP's x * sigmoid(1.702 x) ("quick_gelu")."""
  if name == "gelu_tanh":
    return lambda x: nn.gelu(x, approximate=True)
  if name == "gelu":
    return lambda x: nn.gelu(x, approximate=False)
  if name == "quick_gelu":
    return lambda x: x * nn.sigmoid(1.702 * x)
  raise ValueError(f"Unknown ViT mlp_act {name!r}; expected gelu_tanh, gelu or quick_gelu")


class MlpBlock(nn.Module):
  mlp_dim: int
  dropout: float = 0.0
  act: str = "gelu_tanh"
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, train: bool):
    d = x.shape[-1]
    x = nn.Dense(
      self.mlp_dim,
      dtype=self.dtype,
      kernel_init=nn.initializers.xavier_uniform(),
      bias_init=nn.initializers.normal(1e-6),
    )(x)
    x = activation(self.act)(x)
    x = nn.Dropout(self.dropout)(x, deterministic=not train)
    return nn.Dense(
      d,
      dtype=self.dtype,
      kernel_init=nn.initializers.xavier_uniform(),
      bias_init=nn.initializers.normal(1e-6),
    )(x)


class Encoder1DBlock(nn.Module):
  """Pre-LN transformer block: x + MHA(LN(x)), then x + MLP(LN(x)).

  With `layer_scale` (DINOv2) each branch is multiplied by a learned per-channel vector
  (`ls1`, `ls2`, initialised to 1) before the residual add.
  """

  mlp_dim: int
  num_heads: int
  dropout: float = 0.0
  mlp_act: str = "gelu_tanh"
  ln_eps: float = 1e-6
  layer_scale: bool = False
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, train: bool):
    x = nn.with_logical_constraint(x, ("act_batch", "act_len", "act_emb"))
    d = x.shape[-1]
    y = nn.LayerNorm(epsilon=self.ln_eps, dtype=self.dtype)(x)
    y = nn.MultiHeadDotProductAttention(
      num_heads=self.num_heads,
      dtype=self.dtype,
      force_fp32_for_softmax=True,
      kernel_init=nn.initializers.xavier_uniform(),
      deterministic=not train,
      dropout_rate=self.dropout,
    )(y, y)
    if self.layer_scale:
      y = y * self.param("ls1", nn.initializers.ones, (d,), jnp.float32).astype(y.dtype)
    y = nn.Dropout(self.dropout)(y, deterministic=not train)
    x = x + y
    y = nn.LayerNorm(epsilon=self.ln_eps, dtype=self.dtype)(x)
    y = MlpBlock(self.mlp_dim, self.dropout, self.mlp_act, self.dtype)(y, train)
    if self.layer_scale:
      y = y * self.param("ls2", nn.initializers.ones, (d,), jnp.float32).astype(y.dtype)
    y = nn.Dropout(self.dropout)(y, deterministic=not train)
    return x + y


class Encoder(nn.Module):
  """`depth` blocks then a final LayerNorm; names match big_vision's checkpoints.

  `remat` recomputes each block's activations in the backward pass (per-block checkpointing):
  the step keeps only the blocks' inputs, not their attention maps and MLP activations.
  """

  depth: int
  mlp_dim: int
  num_heads: int
  dropout: float = 0.0
  mlp_act: str = "gelu_tanh"
  ln_eps: float = 1e-6
  layer_scale: bool = False
  dtype: Any = jnp.float32
  remat: bool = False

  @nn.compact
  def __call__(self, x, train: bool):
    blocks = {}
    # __call__(self, x, train): `train` (argument 2) is static.
    block = nn.remat(Encoder1DBlock, static_argnums=(2,)) if self.remat else Encoder1DBlock
    for i in range(self.depth):
      x = block(
        self.mlp_dim,
        self.num_heads,
        self.dropout,
        self.mlp_act,
        self.ln_eps,
        self.layer_scale,
        self.dtype,
        name=f"encoderblock_{i}",
      )(x, train)
      blocks[f"block{i}"] = x
    return nn.LayerNorm(epsilon=self.ln_eps, dtype=self.dtype, name="encoder_norm")(x), blocks


class _ViT(nn.Module):
  """See the module docstring."""

  width: int = 192
  depth: int = 12
  mlp_dim: int = 768
  num_heads: int = 3
  patch_size: int = 16
  posemb_grid: tuple[int, int] = (14, 14)
  pool_type: str = "gap"  # "gap" (mean of patch tokens) or "tok" (a CLS token)
  dropout: float = 0.0
  # Architecture switches for imported backbones (relations/nn/vit_import.py); the defaults are
  # big_vision's ViT.
  mlp_act: str = "gelu_tanh"  # gelu_tanh | gelu (HF ViT, DINOv2) | quick_gelu (CLIP)
  ln_eps: float = 1e-6  # LayerNorm epsilon (HF ViT 1e-12, CLIP 1e-5)
  layer_scale: bool = False  # DINOv2's per-channel residual branch scales
  pre_norm: bool = False  # CLIP's LayerNorm on the embedded tokens, before block 0
  # Mixed precision: parameters stay float32; matmuls, convolutions and the residual stream run
  # in `dtype` (bfloat16 on accelerators, `relations.train.precision`); softmax and LayerNorm
  # statistics in float32. The outputs are in `dtype`.
  dtype: Any = jnp.float32
  remat: bool = False  # rematerialise each block in the backward pass (Encoder)

  @nn.compact
  def __call__(self, images, train: bool = False):
    out = {}
    p = self.patch_size
    b, h, w, _ = images.shape
    if h % p or w % p:
      raise ValueError(f"Image size {h}x{w} is not a multiple of the patch size {p}; pad first.")
    x = nn.Conv(
      self.width, (p, p), strides=(p, p), padding="VALID", dtype=self.dtype, name="embedding"
    )(images.astype(self.dtype))
    gh, gw = x.shape[1:3]
    posemb = self.param(
      "pos_embedding",
      nn.initializers.normal(stddev=1 / np.sqrt(self.width)),
      (1, *self.posemb_grid, self.width),
      jnp.float32,
    )
    x = x + resample_posemb(posemb, (gh, gw)).astype(x.dtype)
    x = jnp.reshape(x, (b, gh * gw, self.width))
    n_extra = 0
    if self.pool_type == "tok":
      cls = self.param("cls", nn.initializers.zeros, (1, 1, self.width), jnp.float32)
      x = jnp.concatenate([jnp.tile(cls, (b, 1, 1)).astype(x.dtype), x], axis=1)
      n_extra = 1
    if self.pre_norm:
      x = nn.LayerNorm(epsilon=self.ln_eps, dtype=self.dtype, name="pre_norm")(x)
    x = nn.Dropout(self.dropout)(x, deterministic=not train)
    x, blocks = Encoder(
      self.depth,
      self.mlp_dim,
      self.num_heads,
      self.dropout,
      self.mlp_act,
      self.ln_eps,
      self.layer_scale,
      self.dtype,
      self.remat,
      name="Transformer",
    )(x, train)
    out.update(blocks)
    tokens = x[:, n_extra:]
    out["encoded"] = tokens
    out["patch_grid"] = jnp.reshape(tokens, (b, gh, gw, self.width))
    pooled = x[:, 0] if self.pool_type == "tok" else jnp.mean(tokens, axis=1)
    out["pooled"] = pooled
    return pooled, out


def Model(*, variant: str | None = None, **kw) -> _ViT:  # pylint: disable=invalid-name
  """Factory: `Model(variant="B/16", posemb_grid=(14, 14))`; explicit kwargs override the variant."""
  cfg = {**decode_variant(variant), **kw}
  if "posemb_grid" in cfg:
    cfg["posemb_grid"] = tuple(cfg["posemb_grid"])
  return _ViT(**cfg)


# --- big_vision checkpoint import ------------------------------------------------------------
# Our module names follow big_vision's (`embedding`, `pos_embedding`, `cls`,
# `Transformer/encoderblock_<i>/{LayerNorm_0,MultiHeadDotProductAttention_0,LayerNorm_1,MlpBlock_0}`,
# `Transformer/encoder_norm`), so flat '/'-joined keys map one to one; only prefixes differ.


def flatten_params(tree, prefix: str = "") -> dict[str, Any]:
  """{'a': {'b': x}} -> {'a/b': x}."""
  flat = {}
  for k, v in tree.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict) or hasattr(v, "items"):
      flat.update(flatten_params(v, key + "/"))
    else:
      flat[key] = v
  return flat


def unflatten_params(flat: dict[str, Any]) -> dict:
  """Inverse of `flatten_params`."""
  tree: dict = {}
  for k, v in flat.items():
    node = tree
    parts = k.split("/")
    for part in parts[:-1]:
      node = node.setdefault(part, {})
    node[parts[-1]] = v
  return tree


def load(params: dict, path: str, *, strict: bool = True) -> dict:
  """Loads a big_vision `.npz` ViT checkpoint into `params` (a new tree is returned).

  Args:
    params: this model's initialised params (the tree structure and target shapes).
    path: local path of a big_vision `.npz` (flat keys joined by '/'; a leading 'params/' and an
      'img/' tower prefix, as in two-tower checkpoints, are stripped). Head weights are ignored.
    strict: if True, every parameter of ours must be found in the checkpoint.

  Returns:
    New params holding the checkpoint's values; `pos_embedding` ([1, N, D] or [1, h, w, D] in the
    file) is resampled to this model's grid.

  Raises:
    ValueError: a shape mismatch (naming the key), or missing keys when strict.
  """
  with np.load(path, allow_pickle=False) as f:
    ckpt = {re.sub(r"^(params/)?(img/)?", "", k): f[k] for k in f.files}
  ours = flatten_params(jax.tree.map(np.asarray, params))
  new, found = dict(ours), set()
  for key, v in ckpt.items():
    if key not in ours:
      continue  # e.g. the classification head
    target = ours[key]
    if key == "pos_embedding":
      if v.ndim == 3:  # big_vision stores [1, N, D]; make it a grid.
        side = int(round(np.sqrt(v.shape[1])))
        if side * side != v.shape[1]:
          raise ValueError(f"{path}: pos_embedding with {v.shape[1]} tokens is not a square grid")
        v = v.reshape(1, side, side, v.shape[-1])
      v = np.asarray(resample_posemb(jnp.asarray(v), target.shape[1:3]))
    if tuple(v.shape) != tuple(target.shape):
      raise ValueError(
        f"{path}: key {key!r} has shape {tuple(v.shape)}, the model expects {tuple(target.shape)}"
      )
    new[key] = v.astype(target.dtype)
    found.add(key)
  missing = sorted(set(ours) - found)
  if strict and missing:
    raise ValueError(f"{path}: checkpoint lacks {len(missing)} parameters, e.g. {missing[:5]}")
  return jax.tree.map(jnp.asarray, unflatten_params(new))
