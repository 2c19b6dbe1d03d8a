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

`demo.run_demo(workdir)` is this task's part of the README demo (synthetic data ->
TFDS -> train tiny -> predictions -> scores, plus a Canny baseline scored by
the same evaluator).
"""

from absl import logging
import jax.numpy as jnp
import numpy as np

from relations.occlusion.data import preprocess as occlusion_pp
from relations.occlusion import losses
from relations.occlusion import model as occlusion_vit
from relations.occlusion import orient_head
from relations.train import precision


# ---------------------------------------------------------------- data
def make_builder(config):
  """Builds (if needed) and returns the TFDS builder named by `config.data`."""
  from relations.occlusion.data import occlusion_boundaries  # pylint: disable=g-import-not-at-top
  from relations import tfds_util  # pylint: disable=g-import-not-at-top

  return tfds_util.ensure_built(
    occlusion_boundaries.Builder,
    config.data.data_dir,
    config.data.manual_dir or None,
    config=config.data.builder_config,
  )


class TrainSource:
  """The training split, reading only what training uses (picklable for grain workers).

  `as_data_source` decodes every feature of an example: the full-size float32
  `depth` map no training config uses and three zlib-compressed [A, H, W]
  label maps. This source parses the stored record and decodes `id`, `image`
  and the sparse OB pixels `ob` (the dense maps are only rebuilt inside the
  crop window, `occlusion_pp.train_example`); `depth` only when `with_depth`.
  """

  def __init__(self, builder, split, with_depth=False):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

    self._features = builder.info.features
    self._keys = ("id", "image", "ob") + (("depth",) if with_depth else ())
    self._raw = builder.as_data_source(
      split, deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES
    )

  def __len__(self):
    return len(self._raw)

  def hard_negative_flags(self):
    """bool [N]: which examples are hard negatives (one pass over the stored records)."""
    parse = self._features._example_parser_np.parse_example  # pylint: disable=protected-access
    return np.array([bool(parse(self._raw[i])["hard_negative"]) for i in range(len(self._raw))])

  def __getitem__(self, index):
    raw = self._features._example_parser_np.parse_example(self._raw[index])  # pylint: disable=protected-access
    return {k: self._features[k].decode_example_np(raw[k]) for k in self._keys}


def make_train_source(config):
  """The training source; with `offline_16x` RealOOB's pool (positives x 16 + hard negatives)."""
  src = TrainSource(make_builder(config), config.data.train_split)
  if config.data.get("offline_16x", False):
    out = occlusion_pp.ExpandedSource(src, 16, hard_negative=src.hard_negative_flags())
    logging.info("%s", out.summary()[2])
    return out
  return src


def preprocess_train(example, rng, config):
  """Raw builder example (or an ExpandedSource item) -> fixed-shape arrays.

  Returns:
    dict image [h, w, 3], boundary, orientation, valid, mask [h, w] (float32),
    (h, w) = config.input.crop_size.
  """
  inp = config.input
  kw = dict(
    scale_range=tuple(inp.scale_range),
    flips=inp.flips,
    rotations=inp.rotations,
    photometric_strength=inp.photometric,
  )
  if "sample" in example:
    return occlusion_pp.train_sample(example["sample"], rng, tuple(inp.crop_size), **kw)
  # Crop first: only the window under the crop is decoded to float and
  # transformed (`train_example`).
  if "ob" in example:  # TrainSource: sparse labels
    num_ann = int(example["ob"]["annotators"])
  else:
    num_ann = np.asarray(example["boundaries"]).shape[0]
  return occlusion_pp.train_example(
    example, int(rng.integers(num_ann)), rng, tuple(inp.crop_size), **kw
  )


# ---------------------------------------------------------------- model
def make_model(config):
  """The configured model: the ViT with its fused orientation output, or an
  edge detector (`model.edge_detector`: vit | conv) + RealOOB's orientation
  head on multi-level features (`model.orient_head` = "opnet", orient_head.py)."""
  m = config.model
  edge_kind = m.get("edge_detector", "vit")
  headed = m.orientation and (m.get("orient_head", "fused") == "opnet" or edge_kind == "conv")
  if edge_kind == "conv":
    edge = orient_head.ConvEdgeDetector(channels=tuple(m.conv_channels))
  elif edge_kind == "vit":
    depth = m.get("vit", {}).get("depth") or vit_depth(m)
    edge = occlusion_vit.Model(
      vit_variant=m.get("vit_variant") or None,
      vit_kw=m.get("vit"),
      head_dim=m.head_dim,
      fuse_dim=m.fuse_dim,
      hires=m.hires,
      hires_channels=m.hires_channels,
      orientation=m.orientation and not headed,
      dtype=precision.compute_dtype(config),
      remat=precision.remat(config),
      # Multi-level: the blocks at 1/4, 1/2, 3/4 and the end of the encoder.
      feature_blocks=tuple(sorted({max(depth * k // 4 - 1, 0) for k in (1, 2, 3, 4)}))
      if headed
      else (),
    )
  else:
    raise ValueError(f"config.model.edge_detector: unknown {edge_kind!r} (vit, conv)")
  if not headed:
    if edge_kind == "conv":  # boundary only
      return orient_head.HeadlessEdge(edge=edge)
    return edge
  head = orient_head.OrientationHead(dim=m.get("orient_head_dim", 32))
  return orient_head.HeadedModel(edge=edge, head=head)


def vit_depth(m):
  from relations.nn import vit  # pylint: disable=g-import-not-at-top

  return int(vit.decode_variant(m.get("vit_variant") or None).get("depth", 0))


def init_params(model, batch, rng):
  return model.init(rng, jnp.asarray(batch["image"]), train=False)["params"]


def load_pretrained(config, params):
  """Imports `config.model.init_from` (big_vision .npz or HF ViT / DINOv2 / CLIP) into the ViT;
  warns when a config naming a pretrained `model.backbone` has none."""
  from relations.nn import vit_import  # pylint: disable=g-import-not-at-top

  return vit_import.load_backbone(config.model, params, vit_path(config))


def vit_path(config):
  """Where the ViT encoder's params sit in the model's tree."""
  m = config.model
  headed = m.orientation and (
    m.get("orient_head", "fused") == "opnet" or m.get("edge_detector", "vit") == "conv"
  )
  return ("edge", "vit") if headed else ("vit",)


def loss_fn(model, params, batch, rng, config):
  out = model.apply({"params": params}, batch["image"], train=True, rngs={"dropout": rng})
  mask = batch["mask"]
  lc = config.loss
  if lc.boundary == "hed":
    lb = losses.hed_bce(out["boundary_logits"], batch["boundary"], mask)
  elif lc.boundary == "attention":
    lb = losses.attention_loss(
      out["boundary_logits"], batch["boundary"], mask, beta=lc.beta, gamma=lc.gamma
    )
  else:
    raise ValueError(f"config.loss.boundary: unknown {lc.boundary!r} (hed, attention)")
  metrics = {"loss_boundary": lb}
  loss = lb
  if config.model.orientation:
    if lc.orientation == "opnet":
      lo = losses.opnet_orientation_loss(
        out["orientation_vec"], batch["orientation"], batch["valid"] * mask, mask
      )
    else:
      lo = losses.orientation_loss(
        out["orientation_vec"], batch["orientation"], batch["valid"] * mask, lc.orientation
      )
    loss = loss + lc.w_orientation * lo
    metrics["loss_orientation"] = lo
  return loss, metrics
