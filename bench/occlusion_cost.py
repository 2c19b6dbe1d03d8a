"""Cost per train step of an occlusion_vit config (FLOPs, memory), from XLA.

  python bench/occlusion_cost.py --config configs/occlusion.py:B/16

Lowers the real train step (task loss, value_and_grad, AdamW update) for one
global batch and reads XLA's cost analysis (FLOPs, bytes accessed) and, after
compiling for the host, its memory analysis (arguments, outputs, temporaries).
Also prints an analytic matmul count of the encoder and the head as a cross
check, and the step time this implies on TPU v4 / H100 at a stated MFU.
No accelerator is needed: the FLOP count does not depend on the backend; the
memory figures are for float32 training state and activations on XLA:CPU
(an accelerator's fusion choices move temporaries by tens of percent).

Also prints Table 3's columns of RealOOB: parameters (M) and inference GFLOPs
of one forward pass at 1024 x 768 (`--infer_wh`; padded to a multiple of the
patch as the evaluator does), from XLA's cost analysis of the lowered
forward (FLOPs = 2 x multiply-adds, as the paper's GFLOPs are usually
counted by fvcore-style tools as multiply-adds: both are printed).
"""

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from relations.nn import vit
from relations.occlusion import task as occlusion
from relations.train import config_util
from relations.train import optim

PEAK_BF16 = {"TPU v4 (per chip)": 275e12, "H100 SXM (dense)": 989e12}


def analytic_flops(config):
  """Forward multiply-adds x 2 of the dominant layers, per image."""
  m = config.model
  v = {**vit.decode_variant(m.vit_variant or None), **dict(m.vit)}
  h, w = config.input.crop_size
  p, d, mlp, depth = v["patch_size"], v["width"], v["mlp_dim"], v["depth"]
  n = (h // p) * (w // p)
  enc = 2 * n * (p * p * 3) * d  # patch embedding
  per_layer = 2 * n * d * 3 * d + 2 * n * n * d * 2 + 2 * n * d * d + 2 * n * d * mlp * 2
  enc += depth * per_layer
  c = m.head_dim
  head = 2 * n * d * c
  gh, gw, stride = h // p, w // p, p
  while stride > 4:
    gh, gw, stride = gh * 2, gw * 2, stride // 2
    head += 2 * gh * gw * 9 * c * c
  f = m.fuse_dim
  head += 2 * gh * gw * c * f  # narrow (1x1) before full resolution
  hc = m.hires_channels if m.hires else 0
  if m.hires:
    head += 2 * h * w * 9 * (3 * hc + hc * hc)
    head += 2 * (h // 2) * (w // 2) * 9 * (hc * 2 * hc + 4 * hc * hc)
  cin = f + (3 * hc if m.hires else 0)
  head += 2 * h * w * 9 * (cin * f + f * f) + 2 * h * w * f * 3
  return enc, head


def inference_cost(config, width=1024, height=768):
  """(parameters, forward FLOPs) of one image at width x height, from XLA.

  The image is padded up to a multiple of the patch size (as
  `relations.occlusion.evaluator` pads native-resolution images).
  """
  m = config.model
  patch = int({**vit.decode_variant(m.vit_variant or None), **dict(m.vit)}["patch_size"])
  ph, pw = -(-height // patch) * patch, -(-width // patch) * patch
  model = occlusion.make_model(config)
  image = jnp.zeros((1, ph, pw, 3), jnp.float32)
  params = jax.eval_shape(lambda: occlusion.init_params(model, {"image": image}, jax.random.key(0)))
  n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
  lowered = jax.jit(lambda p, x: model.apply({"params": p}, x, train=False)).lower(params, image)
  cost = lowered.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return n_params, float(cost["flops"])


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--config", default="configs/occlusion.py:B/16")
  ap.add_argument("--mfu", type=float, default=0.4)
  ap.add_argument("--infer_wh", default="1024x768", help="inference size WxH (Table 3: 1024x768)")
  ap.add_argument(
    "--no_compile", action="store_true", help="skip the host compile (no memory analysis)"
  )
  args = ap.parse_args(argv)
  config = config_util.load_config(args.config)
  model = occlusion.make_model(config)
  bs = int(config.input.batch_size)
  h, w = config.input.crop_size
  batch = {
    "image": jnp.zeros((bs, h, w, 3), jnp.float32),
    **{k: jnp.zeros((bs, h, w), jnp.float32) for k in ("boundary", "orientation", "valid", "mask")},
  }
  tx, _ = optim.make_optimizer(config)
  params = jax.eval_shape(lambda: occlusion.init_params(model, batch, jax.random.key(0)))
  opt = jax.eval_shape(tx.init, params)
  n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))

  def step(params, opt, batch):
    (loss, _), g = jax.value_and_grad(
      lambda p: occlusion.loss_fn(model, p, batch, jax.random.key(0), config), has_aux=True
    )(params)
    upd, opt = tx.update(g, opt, params)
    return jax.tree.map(jnp.add, params, upd), opt, loss

  lowered = jax.jit(step).lower(params, opt, batch)
  cost = lowered.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  flops = float(cost["flops"])
  enc, head = analytic_flops(config)
  out = {
    "config": args.config,
    "batch": bs,
    "crop": [h, w],
    "params_M": n_params / 1e6,
    "xla_train_step_GFLOPs": flops / 1e9,
    "analytic_forward_GFLOPs_per_image": {"encoder": enc / 1e9, "head": head / 1e9},
    "analytic_train_step_GFLOPs (3 x fwd x batch)": 3 * (enc + head) * bs / 1e9,
    "bytes_accessed_GB": float(cost.get("bytes accessed", 0)) / 1e9,
  }
  for dev, peak in PEAK_BF16.items():
    out[f"step_ms_at_{args.mfu:.0%}_MFU_{dev}"] = flops / (peak * args.mfu) * 1e3
  iw, ih = (int(v) for v in args.infer_wh.lower().split("x"))
  n_inf, f_inf = inference_cost(config, iw, ih)
  out[f"inference_at_{iw}x{ih}"] = {
    "params_M": n_inf / 1e6,
    "GFLOPs (XLA, 2 x MACs)": f_inf / 1e9,
    "GMACs (= fvcore-style 'GFLOPs')": f_inf / 2e9,
  }
  if not args.no_compile:
    mem = lowered.compile().memory_analysis()
    out["memory_GB"] = {
      "arguments (params+opt+batch)": mem.argument_size_in_bytes / 1e9,
      "outputs": mem.output_size_in_bytes / 1e9,
      "temporaries (activations etc.)": mem.temp_size_in_bytes / 1e9,
    }
  print(json.dumps(out, indent=2))


if __name__ == "__main__":
  main()
