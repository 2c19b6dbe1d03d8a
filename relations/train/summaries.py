"""TensorBoard media: what a researcher looks at besides the scalars.

Evaluators put pictures and text for TensorBoard in their result under `MEDIA` (process 0 only:
`eval_loop.finish` keeps it out of the broadcast to the other processes):

  {"B-ODS": 0.61, ..., MEDIA: {"images": {tag: uint8 [H, W, 3] or [N, H, W, 3]},
                               "texts": {tag: markdown str}}}

and the trainer writes them with `write_eval` under `<eval name>/<tag>` beside the scalars. The
helpers build the pictures the tasks share: `pr_curve_image` (precision-recall curves),
`frame_strip` (a few frames of a tracker GIF side by side), `generations_markdown` (sample
generations as a table). `write_param_overview` writes, per top-level parameter module, its
global norm (`params/norm/<module>`) and a histogram of (a strided sample of) its values
(`params/hist/<module>`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MEDIA = "_media"
HIST_SAMPLES = 1 << 16  # values per module in a parameter histogram (strided sample)


def split_media(res: dict) -> tuple[dict, dict]:
  """(res without MEDIA, its MEDIA dict or {})."""
  res = dict(res or {})
  return res, res.pop(MEDIA, None) or {}


def write_eval(writer, step: int, name: str, res: dict) -> dict:
  """Writes an evaluator's scalars and media under `name/`; returns its result without media."""
  res, media = split_media(res)
  writer.write_scalars(step, {f"{name}/{k}": float(v) for k, v in res.items() if np.isscalar(v)})
  images = {f"{name}/{k}": _nhwc(v) for k, v in (media.get("images") or {}).items()}
  if images:
    writer.write_images(step, images)
  texts = {f"{name}/{k}": str(v) for k, v in (media.get("texts") or {}).items()}
  if texts:
    writer.write_texts(step, texts)
  return res


def _nhwc(x) -> np.ndarray:
  """uint8 [N, H, W, C] (a single [H, W, C] image gets N = 1)."""
  x = np.asarray(x)
  if x.ndim == 3:
    x = x[None]
  if x.ndim != 4 or x.shape[-1] not in (1, 3, 4):
    raise ValueError(f"TensorBoard image: expected [H, W, C] or [N, H, W, C], got {x.shape}")
  return x.astype(np.uint8) if x.dtype != np.uint8 else x


def pr_curve_image(curves: dict[str, tuple[Sequence[float], Sequence[float]]], title: str = ""):
  """RGB uint8 [H, W, 3] of precision (y) against recall (x), one line per curve.

  Args:
    curves: {label: (recall [K], precision [K])}, fractions in [0, 1].
    title: figure title (e.g. the step).
  """
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg", force=False)
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  fig = Figure(figsize=(4, 4), dpi=80)
  canvas = FigureCanvasAgg(fig)
  ax = fig.add_subplot(1, 1, 1)
  for label, (r, p) in curves.items():
    ax.plot(np.asarray(r, float), np.asarray(p, float), label=label)
  ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="recall", ylabel="precision", title=title)
  ax.grid(alpha=0.3)
  if curves:
    ax.legend(loc="lower left", fontsize=8)
  canvas.draw()
  return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def frame_strip(frames: Sequence[np.ndarray], count: int = 4) -> np.ndarray:
  """`count` frames (evenly spaced) of a clip side by side: uint8 [H, count W, 3]."""
  if not len(frames):
    raise ValueError("frame_strip: no frames")
  idx = np.unique(np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int))
  return np.concatenate([np.asarray(frames[i], np.uint8) for i in idx], axis=1)


def generations_markdown(rows: Sequence[tuple[str, Sequence[str]]], limit: int = 8) -> str:
  """A markdown table of sample generations: rows of (context, [generation, ...])."""
  esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
  lines = ["| context | generations |", "|---|---|"]
  for ctx, gens in list(rows)[:limit]:
    lines.append(f"| {esc(ctx)} | {'<br>'.join(esc(g) for g in gens)} |")
  return "\n".join(lines)


def param_overview(params: Any) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
  """({module: global norm}, {module: strided sample of its values}) on the devices.

  Jitted with replicated outputs, so every process can read them whatever the parameters'
  sharding (FSDP across hosts included); only HIST_SAMPLES values per module leave the devices.
  """
  groups = params if isinstance(params, dict) else {"params": params}
  leaves = jax.tree.leaves(groups)
  sh = getattr(leaves[0], "sharding", None) if leaves else None
  out_sh = NamedSharding(sh.mesh, P()) if isinstance(sh, NamedSharding) else None
  return _stats_fn(out_sh)(groups)


@functools.lru_cache(maxsize=8)
def _stats_fn(out_sh):
  """The jitted statistics with replicated outputs on `out_sh`'s mesh (one per mesh)."""
  return jax.jit(_stats, out_shardings=out_sh)


def _stats(tree):
  norms, samples = {}, {}
  for name, sub in tree.items():
    leaves = [jnp.ravel(x).astype(jnp.float32) for x in jax.tree.leaves(sub)]
    if not leaves:
      continue
    norms[name] = jnp.sqrt(sum(jnp.sum(x * x) for x in leaves))
    flat = jnp.concatenate(leaves)
    stride = max(1, flat.size // HIST_SAMPLES)
    samples[name] = flat[::stride][:HIST_SAMPLES]
  return norms, samples


def write_param_overview(writer, step: int, params: Any) -> None:
  """`params/norm/<module>` scalars and `params/hist/<module>` histograms (module docstring)."""
  norms, samples = jax.device_get(param_overview(params))
  writer.write_scalars(step, {f"params/norm/{k}": float(v) for k, v in norms.items()})
  writer.write_histograms(step, {f"params/hist/{k}": np.asarray(v) for k, v in samples.items()})
