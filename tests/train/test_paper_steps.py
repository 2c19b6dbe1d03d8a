"""The paper configs' real train steps (relations.train.trainer.make_train_step).

* No task's step calls back into the host: each paper config's step is lowered and its
  custom_call targets are searched for host callbacks (a jax.pure_callback is caught).
* Every paper config (occlusion `B/16`, video_relations `paper`, commonsense `small`) trains 2
  steps at its real input shapes (batch 1) and full depth from an imported backbone file, through
  the trainer's own `_maybe_load_pretrained` and step: an AugReg-layout .npz ViT-B/16 for the two
  ViT tasks, a Hugging Face GPT-2 small (`save_pretrained` of a randomly initialised
  `transformers.GPT2LMHeadModel`) for commonsense. The inputs are random arrays of the
  preprocessed shapes and dtypes rather than built datasets.
"""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.nn import vit

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
  "paper_configs", os.path.join(_ROOT, "bench", "paper_configs.py")
)
paper_configs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper_configs)


def test_host_callback_detector_sees_pure_callback():
  def f(x):
    return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  text = jax.jit(f).lower(jnp.zeros(3)).as_text()
  assert paper_configs.host_callbacks(text), text


@pytest.mark.slow  # compiles each paper-size step
@pytest.mark.parametrize("task", sorted(paper_configs.PAPER))
def test_paper_step_has_no_host_callback(task):
  config = paper_configs.paper_config(task)
  step, state, batch, _ = paper_configs.build_step(config, jax.devices()[:1], batch_size=2)
  text = step.lower(state, batch).as_text()
  assert "custom_call" in text or "stablehlo" in text
  assert paper_configs.host_callbacks(text) == []


def _augreg_npz(path, vit_params, rng):
  """Random values in the AugReg layout (CLS position in a 14 x 14 + 1 table, old names).

  Returns the file's name of the second block's first MLP kernel and our tree path to it.
  """
  ckpt = {}
  for k, v in vit.flatten_params(vit_params).items():
    k = k.replace("MultiHeadDotProductAttention_0", "MultiHeadDotProductAttention_1")
    k = k.replace("/LayerNorm_1/", "/LayerNorm_2/").replace("/MlpBlock_0/", "/MlpBlock_3/")
    shape = v.shape
    if k == "pos_embedding":
      k, shape = "Transformer/posembed_input/pos_embedding", (1, 197, v.shape[-1])
    ckpt[k] = (0.05 * rng.standard_normal(shape)).astype(np.float32)
  np.savez(path, **ckpt)
  return (
    "Transformer/encoderblock_1/MlpBlock_3/Dense_0/kernel",
    ("Transformer", "encoderblock_1", "MlpBlock_0", "Dense_0", "kernel"),
  )


def _hf_gpt2(model_dir, lm_params):
  """A randomly initialised HF GPT-2 of the LM's size, saved with `save_pretrained`.

  Returns the path of its model.safetensors, the safetensors name of the second block's MLP input
  kernel and our tree path to it.
  """
  torch = pytest.importorskip("torch")  # test extra
  transformers = pytest.importorskip("transformers")
  torch.manual_seed(0)
  layers = sum(1 for k in lm_params if k.startswith("h_"))
  width = lm_params["wpe"]["embedding"].shape[1]
  cfg = transformers.GPT2Config(
    n_layer=layers,
    n_embd=width,
    n_head=width // 64,
    n_positions=lm_params["wpe"]["embedding"].shape[0],
    vocab_size=50257,
  )
  model = transformers.GPT2LMHeadModel(cfg)
  model.save_pretrained(str(model_dir))
  return (
    str(model_dir / "model.safetensors"),
    "transformer.h.1.mlp.c_fc.weight",
    ("lm", "h_1", "mlp", "c_fc", "kernel"),
  )


def _at(tree, path):
  for k in path:
    tree = tree[k]
  return np.asarray(tree)


@pytest.mark.slow  # paper-size models trained a few steps
@pytest.mark.parametrize("task", sorted(paper_configs.PAPER))
def test_paper_config_trains_from_imported_backbone(tmp_path, task):
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  config = paper_configs.paper_config(task)
  step, _, batch, p = paper_configs.build_step(config, jax.devices()[:1], batch_size=1)
  with jax.set_mesh(p["mesh"]):
    state = jax.jit(p["init_fn"], out_shardings=p["state_sh"])(jax.random.key(0))
    random_init = jax.device_get(state["params"])
    if task == "commonsense":
      path, name, ours = _hf_gpt2(tmp_path, random_init["lm"])
      from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top

      expected = load_file(path)[name]
    else:
      prefix = {"occlusion": "vit", "video_relations": "encoder"}[task]
      path = str(tmp_path / "backbone.npz")
      name, ours = _augreg_npz(path, random_init[prefix], np.random.default_rng(1))
      ours = (prefix, *ours)
      expected = np.load(path)[name]
    with config.unlocked():
      config.model.init_from = path
    state = trainer._maybe_load_pretrained(p["task"], config, state, p["state_sh"])  # pylint: disable=protected-access
    imported = jax.device_get(state["params"])
    np.testing.assert_array_equal(_at(imported, ours), expected)
    assert not np.array_equal(_at(random_init, ours), expected)
    arrays = {
      k: jax.device_put(v, p["batch_sh"][k])
      for k, v in paper_configs.random_batch(batch, seed=2).items()
    }
    rng = jax.random.fold_in(jax.random.key(int(config.seed)), 0)
    loss_fn = jax.jit(lambda prm, b: p["task"].loss_fn(p["model"], prm, b, rng, config)[0])
    direct = float(loss_fn(imported, arrays))
    losses = []
    for _ in range(2):
      state, metrics = step(state, arrays)
      losses.append(float(metrics["loss"]))
  assert np.isfinite(losses).all(), losses
  # The first step's loss is the forward pass with the imported weights (a random init's differs:
  # the imported kernel above is not the init's).
  assert losses[0] == pytest.approx(direct, rel=1e-5, abs=1e-6)
  assert int(state["step"]) == 2
