"""A small task for trainer tests: classify the dominant colour of noisy images with the shared ViT.

Learnable (the colour is visible), tiny, and fully in memory, so trainer tests exercise the real
trainer, sharding, checkpointing and ViT without depending on any dataset builder.
"""

import flax.linen as nn
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from relations.nn import vit

NUM_CLASSES = 4


class Source:
  def __init__(self, n, size, seed):
    rng = np.random.default_rng(seed)
    self.labels = rng.integers(0, NUM_CLASSES, n)
    self.noise = rng.normal(0, 0.3, (n, size, size, 3)).astype(np.float32)

  def __len__(self):
    return len(self.labels)

  def __getitem__(self, i):
    colour = np.eye(3, dtype=np.float32)[self.labels[i] % 3] * (1 if self.labels[i] < 3 else -1)
    return {"image": self.noise[i] + colour, "label": self.labels[i]}


class Classifier(nn.Module):
  vit_kw: dict

  @nn.compact
  def __call__(self, images, train=False):
    pooled, _ = vit.Model(**self.vit_kw, name="encoder")(images, train=train)
    return nn.Dense(NUM_CLASSES, name="head")(pooled)


def make_model(config):
  return Classifier(vit_kw=dict(config.model.to_dict()))


def make_train_source(config):
  return Source(config.input.num_examples, config.input.size, 0)


def preprocess_train(example, rng, config):
  img = example["image"]
  if rng.random() < 0.5:
    img = img[:, ::-1]
  return {"image": np.ascontiguousarray(img), "label": np.int32(example["label"])}


def init_params(model, batch, rng):
  return model.init(rng, jnp.asarray(batch["image"]))["params"]


def load_pretrained(config, params):
  """Stands in for an external checkpoint: sets the head bias to `config.init_head_bias`."""
  value = config.get("init_head_bias")
  if value is None:
    return params
  head = {**params["head"], "bias": np.full(NUM_CLASSES, value, np.float32)}
  return {**params, "head": head}


def loss_fn(model, params, batch, rng, config):
  logits = model.apply({"params": params}, batch["image"], train=True, rngs={"dropout": rng})
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean()
  acc = jnp.mean(jnp.argmax(logits, -1) == batch["label"])
  return loss, {"accuracy": acc}


def get_config(arg=None):
  del arg
  c = ml_collections.ConfigDict()
  c.task = "tests.toy_task"
  c.seed = 0
  c.total_steps = 6
  c.input = dict(batch_size=16, num_examples=64, size=16, num_threads=0, num_workers=0)
  c.model = dict(width=32, depth=1, mlp_dim=64, num_heads=2, patch_size=4, posemb_grid=(4, 4))
  c.mesh = [("data", -1), ("fsdp", 1)]
  c.partition_rules = [(".*", "fsdp")]
  c.fsdp_min_size = 256
  c.optax = dict(name="adamw", weight_decay=1e-4, clip_norm=1.0)
  c.schedule = dict(lr=3e-3, warmup_steps=2, decay="cosine")
  c.checkpoint_every = 3
  c.keep_checkpoints = 3
  c.log_every = 1
  c.async_checkpoints = False
  c.evals = {}
  c.init_head_bias = None  # see load_pretrained
  return c
