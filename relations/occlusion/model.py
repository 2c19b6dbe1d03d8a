"""ViT occlusion-boundary model: boundary logits + orientation, full resolution.

  model = occlusion_vit.Model(vit_variant="B/16", head_dim=256, fuse_dim=64)
  out = model.apply({"params": p}, images, train=False)
  out["boundary_logits"]  [B, H, W]     sigmoid -> boundary probability
  out["orientation_vec"]  [B, H, W, 2]  (cos, sin) direction, unnormalised
  out["orientation"]      [B, H, W]     atan2(sin, cos), radians in (-pi, pi]

`images` are [B, H, W, 3] in [-1, 1] with H, W multiples of the patch size
(pad with `occlusion_pp.pad_to_multiple`).

Architecture:
* the shared ViT encoder (`relations.nn.vit`) gives a [H/p, W/p, D] token
  grid; a dense head projects it (1x1), then upsamples by 2 per stage with a
  3x3 conv after each bilinear x2 resize until stride <= 4, narrows to
  `fuse_dim` channels (1x1) and resizes bilinearly to full resolution;
* a light high-resolution conv branch (stride 1 and 2, a few 3x3 convs on the
  image) supplies the single-pixel localisation a 16-px token cannot;
* fusion: concat + two 3x3 convs at full resolution -> 1 boundary logit and a
  2-vector for the orientation.

Orientation is predicted as a (cos, sin) vector rather than the angle: the
vector is continuous where the angle wraps (-pi ~ pi), so neither the output
nor the loss has a discontinuity, and both the cosine loss and a smooth-L1 on
the wrapped angle difference (DOOBNet-style) can be computed from it.
"""

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from relations.nn import vit


def _resize(x, h, w):
  return jax.image.resize(x, (x.shape[0], h, w, x.shape[-1]), "bilinear")


class HiResBranch(nn.Module):
  """Light conv branch on the image: [B, H, W, 3] -> [B, H, W, C]."""

  channels: int = 16
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, images):
    c, dt = self.channels, self.dtype
    x = nn.gelu(nn.Conv(c, (3, 3), dtype=dt, name="conv0")(images.astype(dt)))
    x = nn.gelu(nn.Conv(c, (3, 3), dtype=dt, name="conv1")(x))
    full = x
    y = nn.gelu(nn.Conv(2 * c, (3, 3), strides=(2, 2), dtype=dt, name="down")(x))
    y = nn.gelu(nn.Conv(2 * c, (3, 3), dtype=dt, name="conv2")(y))
    y = _resize(y, *full.shape[1:3])
    return jnp.concatenate([full, y], -1)


class OcclusionViT(nn.Module):
  """See the module docstring."""

  vit_config: Any = None  # kwargs of vit.Model (variant=... or sizes)
  head_dim: int = 64
  fuse_dim: int = 32
  hires: bool = True
  hires_channels: int = 16
  orientation: bool = True
  prior_logit: float = -4.0  # initial boundary bias: sigmoid(-4) = 1.8%
  # Encoder blocks returned as out["features"] (patch grids) for an external
  # multi-level head (orient_head.py); () = none.
  feature_blocks: tuple = ()
  # Compute dtype of the ViT and the head (parameters stay float32); outputs are float32.
  dtype: Any = jnp.float32
  remat: bool = False  # per-block rematerialisation of the ViT

  @nn.compact
  def __call__(self, images, train: bool = False):
    b, h, w, _ = images.shape
    dt = self.dtype
    vit_kw = {"dtype": dt, "remat": self.remat, **dict(self.vit_config or {})}
    encoder = vit.Model(**vit_kw, name="vit")
    _, enc = encoder(images, train=train)
    x = enc["patch_grid"]
    stride = h // x.shape[1]
    x = nn.Dense(self.head_dim, dtype=dt, name="proj")(nn.LayerNorm(dtype=dt, name="pre_ln")(x))
    i = 0
    while stride > 4:
      x = _resize(x, x.shape[1] * 2, x.shape[2] * 2)
      stride //= 2
      x = nn.gelu(nn.Conv(self.head_dim, (3, 3), dtype=dt, name=f"up{i}")(x))
      i += 1
    # Narrow before going to full resolution: the full-resolution convs
    # dominate the head's cost (H * W * 9 * channels^2).
    f = self.fuse_dim
    x = _resize(nn.Dense(f, dtype=dt, name="narrow")(x), h, w)
    if self.hires:
      x = jnp.concatenate([x, HiResBranch(self.hires_channels, dt, name="hires")(images)], -1)
    x = nn.gelu(nn.Conv(f, (3, 3), dtype=dt, name="fuse0")(x))
    x = nn.gelu(nn.Conv(f, (3, 3), dtype=dt, name="fuse1")(x))
    # Start at the OB prior (p ~ 2%, RetinaNet's trick): from p = 0.5 the
    # class-balanced losses (negatives weighted ~0.03) take thousands of
    # steps to push the background down.
    out = {
      "boundary_logits": nn.Conv(
        1, (1, 1), bias_init=nn.initializers.constant(self.prior_logit), name="boundary"
      )(x)[..., 0].astype(jnp.float32)
    }
    if self.orientation:
      vec = nn.Conv(2, (1, 1), dtype=dt, name="orient")(x).astype(jnp.float32)
      out["orientation_vec"] = vec
      out["orientation"] = jnp.arctan2(vec[..., 1], vec[..., 0])
    if self.feature_blocks:
      gh, gw = enc["patch_grid"].shape[1:3]  # drop a class token, keep the grid
      out["features"] = [
        jnp.reshape(enc[f"block{i}"][:, -gh * gw :], (b, gh, gw, -1)) for i in self.feature_blocks
      ]
    return out


def Model(
  *,
  vit_variant: Optional[str] = None,
  vit_kw: Any = None,  # pylint: disable=invalid-name
  **kw,
) -> OcclusionViT:
  """Factory: `Model(vit_variant="B/16", vit_kw=dict(posemb_grid=(32, 32)))`."""
  vit_cfg = dict(vit_kw or {})
  if vit_variant:
    vit_cfg["variant"] = vit_variant
  return OcclusionViT(vit_config=vit_cfg, **kw)
