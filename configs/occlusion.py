"""Oriented occlusion boundaries with a ViT dense head (RealOOB, PIOD, BSDS).

Run (paper scale; RealOOB layout under $REALOOB, see the builder's
MANUAL_DOWNLOAD_INSTRUCTIONS):
  python -m relations.train --config configs/occlusion.py:B/16 \
      --config.data.manual_dir=$REALOOB --workdir /tmp/occ_b16
  python -m relations.predict --config configs/occlusion.py:B/16 \
      --config.data.manual_dir=$REALOOB --workdir /tmp/occ_b16 --eval test
Tiny (synthetic demo): `relations.occlusion.demo.run_demo(workdir)`.

Arg keys (`configs/occlusion.py:variant=B/16,loss=hed,hires=false`):
  variant       tiny | any shared-ViT variant, e.g. B/16, S/16, Ti/16;
  dataset       realoob | piod | bsds_ownership (builder config);
  orient        orientation head on/off (ablation);
  loss          attention (DOOBNet) | hed (class-balanced BCE);
  orient_loss   cosine | smooth_l1 (on the wrapped angle error);
  hires         high-resolution conv branch on/off (ablation);
  patch         patch size override (0 = the variant's; ablation);
  offline_16x   auto | true | false: the 16x offline geometric augmentation of the
                positive training images (hard negatives once), RealOOB's 6,488-sample
                pool; auto = on for the paper variants, off for tiny;
  orient_head   fused (one head, the default) | opnet: RealOOB's "+ orientation head" protocol,
                a separate head on multi-level backbone features trained with the OPNet
                orientation loss (relations/occlusion/orient_head.py);
  edge          vit (default) | conv: the boundary backbone; conv = a small HED-style conv
                edge detector (always with the opnet head when orient=true);
  backbone      pretrained ViT the paper setup starts from (relations/nn/vit_import.py
                BACKBONES): augreg_b16 (default for B/16), dinov2_b14 (crop 322),
                clip_b16, or none (random init on purpose).

Pretrained backbone: `--config.model.init_from=<local path>` of the backbone's checkpoint
(AugReg ViT-B/16 i21k: gsutil cp gs://vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-
wd_0.1-do_0.0-sd_0.0.npz .; DINOv2 / CLIP: the Hugging Face directory with model.safetensors and
config.json). Without it a paper config logs that the backbone is random.
"""

import common  # configs/common.py
import ml_collections

from relations.nn import vit_import
from relations.train import config_util


# Ablation rows (`python -m relations.sweep --config configs/occlusion.py:tiny --hyper ablations`):
# (label, config arg). "ablations" changes one component of the full model per row and runs on
# the tiny variant; "backbones" needs each backbone's checkpoint (--config.model.init_from).
HYPERS = {
  "ablations": (
    ("ViT + orientation head + high-res branch (attention loss)", ""),
    ("no high-res branch", "hires=false"),
    ("no orientation head (boundaries only)", "orient=false"),
    ("HED loss (class-balanced BCE)", "loss=hed"),
    ("orientation loss smooth L1", "orient_loss=smooth_l1"),
    ("offline 16x geometric augmentation", "offline_16x=true"),
  ),
  "backbones": (
    ("AugReg ViT-B/16 (i21k)", "backbone=augreg_b16"),
    ("DINOv2 ViT-B/14", "backbone=dinov2_b14"),
    ("CLIP ViT-B/16", "backbone=clip_b16"),
    ("ViT-B/16, random init", "variant=B/16,backbone=none"),
  ),
}


def get_hyper(arg=None):
  """Arg strings of ablation `arg` (default "ablations"; see HYPERS)."""
  name = arg or "ablations"
  if name not in HYPERS:
    raise ValueError(f"Unknown hyper {name!r}; available: {', '.join(HYPERS)}")
  return [row for _, row in HYPERS[name]]


def describe_row(row):
  """The label column of a `get_hyper` row: {"Model": ...}."""
  for rows in HYPERS.values():
    for label, arg in rows:
      if arg == row:
        return {"Model": label}
  return {}


def get_config(arg=None):
  arg = config_util.parse_arg(
    arg,
    variant="B/16",
    dataset="realoob",
    orient=True,
    loss="attention",
    orient_loss="cosine",
    hires=True,
    patch=0,
    offline_16x="auto",
    tiny=False,
    backbone="auto",
    orient_head="fused",
    edge="vit",
  )
  tiny = arg.tiny or arg.variant == "tiny"
  if not tiny:  # an unknown variant fails here, not after the dataset build
    from relations.nn import vit  # pylint: disable=g-import-not-at-top

    vit.decode_variant(arg.variant)
  if arg.dataset not in ("realoob", "piod", "bsds_ownership"):
    raise ValueError(
      f"Config arg 'dataset': unknown {arg.dataset!r} (realoob, piod, bsds_ownership)"
    )
  if arg.offline_16x not in ("auto", "true", "false"):
    raise ValueError(f"Config arg 'offline_16x': {arg.offline_16x!r} (auto, true, false)")
  offline_16x = not tiny if arg.offline_16x == "auto" else arg.offline_16x == "true"
  if arg.orient_head not in ("fused", "opnet") or arg.edge not in ("vit", "conv"):
    raise ValueError(
      f"Config args orient_head={arg.orient_head!r} (fused, opnet), edge={arg.edge!r} (vit, conv)"
    )
  headed = arg.orient and (arg.orient_head == "opnet" or arg.edge == "conv")
  c = ml_collections.ConfigDict()
  c.task = "occlusion"
  c.seed = 0
  c.data = dict(
    data_dir="/tmp/tfds_relations",  # TFDS data_dir
    manual_dir="",  # dataset root (see builder docstring)
    builder_config=arg.dataset,
    train_split="train",
    offline_16x=offline_16x,
  )
  c.input = dict(
    batch_size=8,  # the paper's unified protocol
    crop_size=(320, 320),
    scale_range=(0.75, 1.25),
    flips=True,
    rotations=True,
    photometric=1.0,
    num_threads=2,
    # grain worker processes: ~310 crops/s per TPU v4 chip at ~100/s per
    # core (bench/input_pipeline.py).
    num_workers=8,
  )
  c.model = dict(
    vit_variant=arg.variant,
    vit=dict(posemb_grid=(20, 20)),
    head_dim=256,
    fuse_dim=64,
    hires=arg.hires,
    hires_channels=32,
    orientation=arg.orient,
    backbone="",  # a vit_import.BACKBONES name (set below)
    init_from="",  # its local checkpoint path (.npz or HF dir)
    edge_detector=arg.edge,
    orient_head="opnet" if headed else "fused",
    orient_head_dim=64,
    conv_channels=(32, 64, 128, 256),  # edge=conv: the HED-style stages
  )
  c.loss = dict(
    boundary=arg.loss,
    beta=4.0,
    gamma=0.5,
    orientation="opnet" if headed else arg.orient_loss,  # the head is trained with OPNet's loss
    w_orientation=1.0,
  )
  # 50k steps: the paper's unified protocol.
  common.trainer(
    c,
    total_steps=50_000,
    lr=1e-4,
    warmup_steps=1_000,
    decay="cosine",
    weight_decay=0.05,
    clip_norm=1.0,
    checkpoint_every=2_000,
    log_every=50,
  )
  realoob = arg.dataset == "realoob"
  c.evals = ml_collections.ConfigDict()
  # RealOOB: 2-px border exclusion and validity-aware O-metrics; PIOD / BSDS:
  # the doobscripts protocol as published (no border, `_poc`).  matcher:
  # "exact" (fast, deterministic) or "bsds" (the published tables' matcher;
  # needs the `bsds` extra; bsds_seed 0 = clock-seeded).
  c.evals.test = dict(
    type="occlusion",
    every_steps=10_000,
    split="test",
    max_images=0,
    protocol="doob",
    valid_only=realoob,
    border=2 if realoob else 0,
    nthresh=99,
    num_workers=0,
    matcher="exact",
    bsds_seed=0,
    batch_size=1,
  )  # images per process and call (>= 1 per device)
  c.demo = dict(num_train=0, num_test=0, num_hard_negatives=0, size=(64, 64))

  if tiny:
    c.data.data_dir = "/tmp/tfds_relations_tiny"
    # 96 x 96 images: maxDist = 0.0075 * diagonal = 1.02 px, the smallest
    # size at which the standard tolerance admits a 1-px offset.
    c.input.update(
      batch_size=16, crop_size=(96, 96), scale_range=(1.0, 1.0), num_threads=2, num_workers=0
    )
    c.model.vit_variant = ""
    c.model.vit = dict(
      width=64, depth=2, mlp_dim=128, num_heads=2, patch_size=8, posemb_grid=(12, 12)
    )
    c.model.update(
      head_dim=32, fuse_dim=16, hires_channels=8, orient_head_dim=16, conv_channels=(8, 16, 32, 32)
    )
    common.trainer(
      c,
      total_steps=200,
      lr=2e-3,
      warmup_steps=20,
      decay="cosine",
      weight_decay=1e-4,
      clip_norm=1.0,
      checkpoint_every=200,
      log_every=50,
    )
    c.evals.test.update(every_steps=0, num_workers=2)
    c.demo = dict(num_train=192, num_test=24, num_hard_negatives=16, size=(96, 96))
  backbone = arg.backbone
  if backbone == "auto":
    backbone = "augreg_b16" if arg.variant == "B/16" and not tiny and arg.edge == "vit" else "none"
  if backbone != "none":
    if backbone not in vit_import.BACKBONES:
      raise ValueError(
        f"Config arg 'backbone': unknown {backbone!r} ({', '.join(vit_import.BACKBONES)}, none)"
      )
    vit_kw = dict(vit_import.BACKBONES[backbone]["vit"])
    c.model.vit_variant = vit_kw.pop("variant")
    patch = vit_import.vit.decode_variant(c.model.vit_variant)["patch_size"]
    if patch == 14:  # crops must be a multiple of the patch
      c.input.crop_size = (322, 322)
    c.model.vit = dict(posemb_grid=tuple(s // patch for s in c.input.crop_size), **vit_kw)
    c.model.backbone = backbone
  if arg.patch:
    c.model.vit.patch_size = arg.patch
  return c
