"""Random parameters for test models without compiling their initialiser.

`module.init` of a transformer compiles for seconds on CPU (jitted) or runs
op by op for longer (eager); the tests here need parameters of the right
structure, not the initialiser's distribution (which `test_gpt2` covers by
shape and name). `eval_shape` gives the structure; numpy draws the values.
"""

import flax.linen as nn
import jax
import numpy as np


def random_params(module: nn.Module, *args, seed: int = 0, std: float = 0.02, **kwargs):
  """Plain (unboxed) params shaped like `module.init(rng, *args, **kwargs)`.

  LayerNorm scales are 1 + N(0, 0.1); every other leaf (kernels, embeddings,
  biases, LayerNorm biases) is N(0, std), so no parameter is a trivial 0 or 1
  that would hide a mix-up. float32 like the models' params.
  """
  shapes = nn.meta.unbox(
    jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), *args, **kwargs))["params"]
  )
  rng = np.random.default_rng(seed)

  def draw(path, s):
    noise = rng.normal(size=s.shape)
    if getattr(path[-1], "key", None) == "scale":
      return (1.0 + 0.1 * noise).astype(s.dtype)
    return (std * noise).astype(s.dtype)

  return jax.tree_util.tree_map_with_path(draw, shapes)
