"""Occlusion-boundary losses; all take float32 maps [B, H, W], `mask` 1 on real pixels.

- `hed_bce`: HED's class-balanced binary cross-entropy;
- `attention_loss`: DOOBNet's attention loss (class balance times beta^((1-p)^gamma));
- `orientation_loss`: cosine or smooth-L1 on the wrapped angle, on valid boundary pixels only;
- `opnet_orientation_loss`: OPNet's (MT-ORL) orthogonal-orientation loss, for the orientation head.
"""

import jax
import jax.numpy as jnp


def _class_balance(target, mask):
  """Per-image alpha = |Y-| / |Y| (the fraction of non-boundary pixels)."""
  n = jnp.maximum(mask.sum((1, 2), keepdims=True), 1.0)
  pos = (target * mask).sum((1, 2), keepdims=True)
  return (n - pos) / n


def hed_bce(logits, target, mask):
  """Class-balanced BCE (HED): alpha on positives, 1 - alpha on negatives.

  Returns the mean over images of the per-image sum divided by its pixel
  count.
  """
  alpha = _class_balance(target, mask)
  lp, ln = jax.nn.log_sigmoid(logits), jax.nn.log_sigmoid(-logits)
  loss = -(alpha * target * lp + (1 - alpha) * (1 - target) * ln) * mask
  return jnp.mean(loss.sum((1, 2)) / jnp.maximum(mask.sum((1, 2)), 1.0))


def attention_loss(logits, target, mask, beta=4.0, gamma=0.5):
  """DOOBNet attention loss: class balance times beta^((1-p)^gamma) on
  positives and beta^(p^gamma) on negatives (up-weights false negatives and
  false positives).  Normalised like `hed_bce`."""
  alpha = _class_balance(target, mask)
  p = jax.nn.sigmoid(logits)
  lp, ln = jax.nn.log_sigmoid(logits), jax.nn.log_sigmoid(-logits)
  # (1 - p)^gamma and p^gamma with a floor so the gradient stays finite at 0.
  wp = beta ** (jnp.maximum(1 - p, 1e-6) ** gamma)
  wn = beta ** (jnp.maximum(p, 1e-6) ** gamma)
  loss = -(alpha * wp * target * lp + (1 - alpha) * wn * (1 - target) * ln) * mask
  return jnp.mean(loss.sum((1, 2)) / jnp.maximum(mask.sum((1, 2)), 1.0))


def orientation_loss(vec, theta, valid, kind="cosine"):
  """Orientation loss on valid OB pixels only.

  Args:
    vec: [B, H, W, 2] predicted (cos, sin) direction (any length).
    theta: [B, H, W] target radians.
    valid: [B, H, W] 1 where the orientation supervises.
    kind: "cosine" (1 - cos of the angle error) or "smooth_l1" (Huber, delta
      1, on the wrapped angle error, as DOOBNet's smooth-L1 on the angle).

  Returns:
    Scalar mean over valid pixels (0 if there are none).
  """
  if kind == "cosine":
    unit = vec / jnp.sqrt(jnp.sum(vec * vec, -1, keepdims=True) + 1e-6)
    per = 1.0 - (unit[..., 0] * jnp.cos(theta) + unit[..., 1] * jnp.sin(theta))
  elif kind == "smooth_l1":
    d = jnp.arctan2(vec[..., 1], vec[..., 0] + 1e-9) - theta
    d = jnp.arctan2(jnp.sin(d), jnp.cos(d))
    ad = jnp.abs(d)
    per = jnp.where(ad < 1.0, 0.5 * d * d, ad - 0.5)
  else:
    raise ValueError(f"orientation loss: unknown kind {kind!r} (cosine, smooth_l1)")
  return (per * valid).sum() / jnp.maximum(valid.sum(), 1.0)


def opnet_orientation_loss(vec, theta, valid, mask):
  """OPNet's orientation loss (MT-ORL, ICCV 2021), as RealOOB's orientation head uses.

  The predicted 2-vector is normalised to a unit (cos, sin); f = its squared
  distance to (cos theta, sin theta), in [0, 4]; the per-pixel loss is a
  smooth-L1 of f (0.5 f^2 below 1, f - 0.5 above), on valid OB pixels, and
  averaged over all real pixels (`mask`), as OPNet's mean over the map.

  Args:
    vec: [B, H, W, 2] predicted (cos, sin), any length.
    theta: [B, H, W] target radians.
    valid: [B, H, W] 1 where the orientation supervises.
    mask: [B, H, W] 1 on real (not padded) pixels.

  Returns:
    Scalar.
  """
  unit = vec / jnp.sqrt(jnp.sum(vec * vec, -1, keepdims=True) + 1e-12)
  f = (unit[..., 0] - jnp.cos(theta)) ** 2 + (unit[..., 1] - jnp.sin(theta)) ** 2
  per = jnp.where(f < 1.0, 0.5 * f * f, f - 0.5)
  return (per * valid).sum() / jnp.maximum(mask.sum(), 1.0)
