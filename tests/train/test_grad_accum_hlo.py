"""Gradient accumulation splits each device's own rows: no all-gather of the batch in the step."""

import jax

from relations.train import trainer
from tests import toy_task


def _compiled_text(accum):
  c = toy_task.get_config()
  c.grad_accum_steps = accum
  c.input.batch_size = 32  # 4 rows per device of the 8 fake CPU devices, 1 per microbatch
  s = trainer.setup(c, jax.devices()[:8])
  step = trainer.make_train_step(
    s["model"], s["task"], c, s["tx"], s["schedule"], s["state_sh"], s["batch_sh"], s["repl"]
  )
  state = jax.tree.map(
    lambda x, sh: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh),
    s["state_shapes"],
    s["state_sh"],
  )
  size = c.input.size
  batch = {
    "image": jax.ShapeDtypeStruct((32, size, size, 3), "float32", sharding=s["batch_sh"]["image"]),
    "label": jax.ShapeDtypeStruct((32,), "int32", sharding=s["batch_sh"]["label"]),
  }
  with jax.set_mesh(s["mesh"]):
    return step.lower(state, batch).compile().as_text()


def test_grad_accum_has_no_batch_all_gather():
  assert len(jax.devices()) >= 8
  text = _compiled_text(4)
  assert "while" in text  # the microbatch scan is there
  assert "all-gather" not in text
  assert "all-reduce" in text  # the gradients are still summed over the devices
