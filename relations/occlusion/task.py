# Copyright 2025 The relations Authors.
# SPDX-License-Identifier: Apache-2.0
"""Task glue: oriented occlusion boundaries <-> the shared trainer.

Data: the TFDS `occlusion_boundaries` builder (configs realoob, piod,
bsds_ownership) read with `as_data_source`; optionally the 16x offline
geometric augmentation (`config.data.offline_16x`).  Training samples are
fixed-size crops (`config.input.crop_size`) with random scale, 90-degree
rotations, flips and photometric jitter (`relations.occlusion.data.preprocess`);
with several annotators one is drawn per example.

Loss: boundary (`config.loss.boundary`: "hed" class-balanced BCE or
"attention", DOOBNet's attention loss) + `config.loss.w_orientation` x the
orientation loss (`config.loss.orientation`: "cosine" or "smooth_l1") on valid
OB pixels only.

`run_demo(workdir)` is this task's part of the README demo (synthetic data ->
TFDS -> train tiny -> predictions -> scores, plus a Canny baseline scored by
the same evaluator).
"""


import jax.numpy as jnp
import numpy as np

from relations.occlusion.data import preprocess as occlusion_pp
from relations.occlusion import model as occlusion_vit


# ---------------------------------------------------------------- data
def make_builder(config):
  """Builds (if needed) and returns the TFDS builder named by `config.data`."""
  from relations.occlusion.data import occlusion_boundaries# pylint: disable=g-import-not-at-top
  from relations import tfds_util# pylint: disable=g-import-not-at-top
  return tfds_util.ensure_built(occlusion_boundaries.Builder, config.data.data_dir,
                                config.data.manual_dir or None,
                                config=config.data.builder_config)


def make_train_source(config):
  src = make_builder(config).as_data_source(config.data.train_split)
  if config.data.get("offline_16x", False):
    return occlusion_pp.ExpandedSource(src, 16)
  return src


def preprocess_train(example, rng, config):
  """Raw builder example (or an ExpandedSource item) -> fixed-shape arrays.

  Returns:
    dict image [h, w, 3], boundary, orientation, valid, mask [h, w] (float32),
    (h, w) = config.input.crop_size.
  """
  if "sample" in example:
    sample = example["sample"]
  else:
    num_ann = np.asarray(example["boundaries"]).shape[0]
    sample = occlusion_pp.decode(example, int(rng.integers(num_ann)))
  inp = config.input
  return occlusion_pp.train_sample(
      sample, rng, tuple(inp.crop_size), scale_range=tuple(inp.scale_range),
      flips=inp.flips, rotations=inp.rotations,
      photometric_strength=inp.photometric)


# ---------------------------------------------------------------- model
def make_model(config):
  m = config.model
  return occlusion_vit.Model(
      vit_variant=m.get("vit_variant") or None, vit_kw=m.get("vit"),
      head_dim=m.head_dim, fuse_dim=m.fuse_dim, hires=m.hires,
      hires_channels=m.hires_channels, orientation=m.orientation)


def init_params(model, batch, rng):
  return model.init(rng, jnp.asarray(batch["image"]), train=False)["params"]


def load_pretrained(config, params):
  """Imports `config.model.init_from` (big_vision .npz or HF ViT / DINOv2 / CLIP) into the ViT;
  warns when a config naming a pretrained `model.backbone` has none."""
  from relations.nn import vit_import  # pylint: disable=g-import-not-at-top
  return vit_import.load_backbone(config.model, params, ("vit",))


def loss_fn(model, params, batch, rng, config):
  out = model.apply({"params": params}, batch["image"], train=True,
                    rngs={"dropout": rng})
  mask = batch["mask"]
  lc = config.loss
  if lc.boundary == "hed":
    lb = occlusion_vit.hed_bce(out["boundary_logits"], batch["boundary"], mask)
  elif lc.boundary == "attention":
    lb = occlusion_vit.attention_loss(out["boundary_logits"], batch["boundary"],
                                      mask, beta=lc.beta, gamma=lc.gamma)
  else:
    raise ValueError(f"config.loss.boundary: unknown {lc.boundary!r} "
                     "(hed, attention)")
  metrics = {"loss_boundary": lb}
  loss = lb
  if config.model.orientation:
    lo = occlusion_vit.orientation_loss(
        out["orientation_vec"], batch["orientation"], batch["valid"] * mask,
        lc.orientation)
    loss = loss + lc.w_orientation * lo
    metrics["loss_orientation"] = lo
  return loss, metrics
