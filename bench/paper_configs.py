"""Per-device memory, FLOPs and CPU step time of each paper config's real train step.

  python bench/paper_configs.py                 # all three, one subprocess each
  python bench/paper_configs.py --only occlusion --no_time

For each paper config (occlusion `B/16`, video_relations `paper`, commonsense `small`) the
trainer's own jitted step (`relations.train.trainer.make_train_step`: loss, gradients, optax
update, donated state) is lowered with the config's partition rules on its intended mesh, built
from fake CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count), at the config's global
batch, and compiled; nothing is allocated. Reported per device:
  * memory: `compiled.memory_analysis()` arguments + outputs - aliased (donated) + temporaries,
    i.e. params + optimizer state + the batch shard + activations. XLA:CPU's buffer assignment
    (TPU/GPU compilers fuse and rematerialise differently; treat it as an estimate);
  * FLOP per step (XLA cost analysis of the partitioned step, per device, times the devices).
Then, on one CPU device at batch 2 (real input shapes), the wall time of a few steps after
compilation (random weights, random inputs of the right shapes and dtypes).

The intended meshes use the configs' axes (data = all devices, fsdp = 1): TPU v4-32 (16 chips,
32 GB HBM each) where the global batch divides by 16, else 8 devices; and 8x H100 (80 GB).
Last line: `paper configs: occlusion <GB>/<fits>, video_relations <GB>/<fits>, commonsense
<GB>/<fits>` (per-device GB on the v4 mesh; fits = yes|no for 32 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

if "jax" not in sys.modules and "xla_force_host_platform_device_count" not in os.environ.get(
  "XLA_FLAGS", ""
):
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=16"
  )

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

PAPER = {
  "occlusion": "configs/occlusion.py:B/16",
  "video_relations": "configs/video_relations.py:paper",
  "commonsense": "configs/commonsense.py:small",
}


def paper_config(task: str, overrides=()):
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  extra = ["model.lm.vocab_size=50317"] if task == "commonsense" else []
  return config_util.load_config(PAPER[task], extra + list(overrides))


def abstract_batch(config, batch_size: int | None = None) -> dict[str, jax.ShapeDtypeStruct]:
  """ShapeDtypeStructs of one global batch of `config`'s task (what preprocess_train yields)."""
  b = int(batch_size or config.input.batch_size)
  s = jax.ShapeDtypeStruct
  if config.task == "occlusion":
    h, w = config.input.crop_size
    return {
      "image": s((b, h, w, 3), jnp.float32),
      **{k: s((b, h, w), jnp.float32) for k in ("boundary", "orientation", "valid", "mask")},
    }
  if config.task == "video_relations":
    inp = config.input
    t, m, p = int(inp.clip_frames), int(inp.max_objects), int(inp.max_pairs)
    h, w = inp.image_size
    return {
      "frames": s((b, t, h, w, 3), jnp.uint8),  # normalised on device
      "frame_valid": s((b, t), jnp.bool_),
      "frame_time": s((b, t), jnp.float32),
      "boxes": s((b, t, m, 4), jnp.float32),
      "box_valid": s((b, t, m), jnp.bool_),
      "labels": s((b, m), jnp.int32),
      "rel_boxes": s((b, t, m, 4), jnp.float32),
      "pairs": s((b, p, 2), jnp.int32),
      "pair_valid": s((b, p), jnp.bool_),
      "pair_labels": s((b, p, int(config.model.num_predicates)), jnp.float32),
    }
  if config.task == "commonsense":
    lay = config.layout
    k, n = int(lay.num_max_boxes), int(lay.max_seq_len)
    out = {
      "input_ids": s((b, n), jnp.int32),
      "labels": s((b, n), jnp.int32),
      "token_mask": s((b, n), jnp.bool_),
      "slot_mask": s((b, k), jnp.bool_),
      "slot_person_ids": s((b, k), jnp.int32),
    }
    if config.model.visual == "features":
      out["visual_features"] = s((b, k, 2048), jnp.float32)
    else:
      size = int(config.data.image_size)
      out["image"] = s((b, size, size, 3), jnp.float32)
      out["boxes"] = s((b, k, 4), jnp.float32)
    return out
  raise ValueError(f"no abstract batch for task {config.task!r}")


def random_batch(shapes, seed=0):
  """Concrete arrays for `shapes`: valid-looking values (boxes in [0, 1], masks mostly on)."""
  rng = np.random.default_rng(seed)
  out = {}
  for k, v in shapes.items():
    if v.dtype == jnp.bool_:
      out[k] = rng.random(v.shape) < 0.8
    elif jnp.issubdtype(v.dtype, jnp.integer):
      hi = 256 if v.dtype == jnp.uint8 else {"pairs": 2, "labels": 5}.get(k, 100)
      out[k] = rng.integers(0, hi, v.shape).astype(v.dtype)
    elif k in ("boundary", "valid", "mask"):  # occlusion targets are binary maps
      out[k] = (rng.random(v.shape) < (0.1 if k == "boundary" else 0.9)).astype(np.float32)
    elif k == "orientation":  # radians
      out[k] = rng.uniform(-np.pi, np.pi, v.shape).astype(np.float32)
    elif k in ("boxes", "rel_boxes"):
      lo = rng.uniform(0.0, 0.5, v.shape[:-1] + (2,))
      out[k] = np.concatenate([lo, lo + rng.uniform(0.1, 0.5, lo.shape)], -1).astype(np.float32)
    else:
      out[k] = rng.uniform(-1, 1, v.shape).astype(np.float32)
  if "labels" in out and "input_ids" in out:
    out["labels"] = np.where(rng.random(out["labels"].shape) < 0.5, -100, out["input_ids"])
  if "pair_labels" in out:
    out["pair_labels"] = (out["pair_labels"] > 0.8).astype(np.float32)
  return out


def build_step(config, devices, batch_size=None):
  """(jitted step, abstract sharded state, abstract batch, pieces) on a mesh of `devices`."""
  from relations.train import optim, sharding, trainer  # pylint: disable=g-import-not-at-top
  import flax  # pylint: disable=g-import-not-at-top

  mesh = sharding.make_mesh(config.mesh, devices)
  task = trainer.import_by_name("task", config.task)
  model = task.make_model(config)
  tx, schedule = optim.make_optimizer(config)
  batch = abstract_batch(config, batch_size)
  init_batch = {k: np.zeros((1, *v.shape[1:]), v.dtype) for k, v in batch.items()}
  if "pairs" in init_batch:
    init_batch["pairs"][..., 1] = 1

  def init_fn(rng):
    params = flax.core.unfreeze(task.init_params(model, init_batch, rng))
    return {"params": params, "opt": tx.init(params), "step": jnp.zeros((), jnp.int32)}

  shapes = jax.eval_shape(init_fn, jax.random.key(0))
  rules = [tuple(r) for r in config.get("partition_rules", [(".*", "fsdp")])]
  state_sh = sharding.infer_shardings(
    shapes, rules, mesh, int(trainer._setting(config, "fsdp_min_size"))
  )  # pylint: disable=protected-access
  batch_sh = {k: sharding.batch_sharding(mesh) for k in batch}
  step = trainer.make_train_step(
    model, task, config, tx, schedule, state_sh, batch_sh, sharding.replicated(mesh)
  )
  abstract_state = jax.tree.map(
    lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, state_sh
  )
  abstract_in = {
    k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=batch_sh[k]) for k, v in batch.items()
  }
  return (
    step,
    abstract_state,
    abstract_in,
    dict(mesh=mesh, init_fn=init_fn, state_sh=state_sh, batch_sh=batch_sh, task=task, model=model),
  )


def host_callbacks(hlo_text: str) -> list[str]:
  """custom_call targets in lowered (StableHLO) text that call back into the host."""
  import re  # pylint: disable=g-import-not-at-top

  targets = re.findall(r"custom_call\s*@([\w.]+)", hlo_text)
  targets += re.findall(r'call_target_name\s*=\s*"([^"]+)"', hlo_text)
  return sorted({t for t in targets if "callback" in t.lower() or "host" in t.lower()})


def measure(task: str, time_steps: int) -> dict:
  config = paper_config(task)
  bs = int(config.input.batch_size)
  n_dev = 16 if bs % 16 == 0 else 8
  out = {"task": task, "config": PAPER[task], "global_batch": bs}
  for name, n in (("v4", n_dev), ("h100", 8)):
    step, state, batch, _ = build_step(config, jax.devices()[:n])
    t0 = time.time()
    lowered = step.lower(state, batch)
    assert not host_callbacks(lowered.as_text()), host_callbacks(lowered.as_text())
    compiled = lowered.compile()
    mem = compiled.memory_analysis()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    per_dev = (
      mem.argument_size_in_bytes
      + mem.output_size_in_bytes
      - mem.alias_size_in_bytes
      + mem.temp_size_in_bytes
    )
    out[name] = {
      "devices": n,
      "per_device_batch": bs // n,
      "per_device_GB": per_dev / 1e9,
      "args_GB": mem.argument_size_in_bytes / 1e9,
      "temp_GB": mem.temp_size_in_bytes / 1e9,
      "step_TFLOP": float(cost.get("flops", 0.0)) * n / 1e12,
      "compile_s": time.time() - t0,
    }
    del compiled, lowered
  n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state["params"]))
  out["params_M"] = n_params / 1e6
  if time_steps:
    step, state, batch, pieces = build_step(config, jax.devices()[:1], batch_size=2)
    with jax.set_mesh(pieces["mesh"]):
      st = jax.jit(pieces["init_fn"], out_shardings=pieces["state_sh"])(jax.random.key(0))
      arrays = {k: jax.device_put(v, pieces["batch_sh"][k]) for k, v in random_batch(batch).items()}
      t0 = time.time()
      st, metrics = step(st, arrays)
      jax.block_until_ready(metrics)
      out["cpu_first_step_s"] = time.time() - t0
      t0 = time.time()
      for _ in range(time_steps):
        st, metrics = step(st, arrays)
      jax.block_until_ready(metrics)
      out["cpu_step_s_batch2"] = (time.time() - t0) / time_steps
      out["loss"] = float(metrics["loss"])
  try:
    import resource  # pylint: disable=g-import-not-at-top

    out["max_rss_GB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
  except ImportError:
    pass
  return out


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--only", choices=sorted(PAPER), default=None)
  ap.add_argument("--steps", type=int, default=3, help="timed CPU steps at batch 2 (0 = skip)")
  args = ap.parse_args(argv)
  if args.only:
    print("RESULT " + json.dumps(measure(args.only, args.steps)), flush=True)
    return
  print("load before:", os.getloadavg(), flush=True)
  rows = []
  for task in PAPER:  # one process each: the paper steps take 4-7 GB RSS
    res = subprocess.run(
      [sys.executable, __file__, "--only", task, "--steps", str(args.steps)],
      capture_output=True,
      text=True,
      check=False,
    )
    line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    if res.returncode or not line:
      sys.stderr.write(res.stdout[-3000:] + res.stderr[-5000:])
      raise SystemExit(f"{task}: failed (rc {res.returncode})")
    rows.append(json.loads(line[0][len("RESULT ") :]))
  print("load after:", os.getloadavg())
  print(
    f"{'config':36s} {'params':>8s} {'v4 mesh':>8s} {'GB/dev':>7s} {'32GB':>5s} "
    f"{'H100 mesh':>9s} {'GB/dev':>7s} {'80GB':>5s} {'TFLOP/step':>10s} {'CPU s/step@2':>12s}"
    f" {'RSS GB':>6s}"
  )
  for r in rows:
    v4, h = r["v4"], r["h100"]
    print(
      f"{r['config']:36s} {r['params_M']:7.1f}M {v4['devices']:>4d}x{v4['per_device_batch']:<3d}"
      f" {v4['per_device_GB']:7.2f} {'yes' if v4['per_device_GB'] <= 32 else 'no':>5s}"
      f" {h['devices']:>5d}x{h['per_device_batch']:<3d} {h['per_device_GB']:7.2f}"
      f" {'yes' if h['per_device_GB'] <= 80 else 'no':>5s} {v4['step_TFLOP']:10.2f}"
      f" {r.get('cpu_step_s_batch2', float('nan')):12.2f} {r.get('max_rss_GB', 0):6.1f}"
    )
  print(json.dumps(rows))
  print(
    "paper configs: "
    + ", ".join(
      f"{r['task']} {r['v4']['per_device_GB']:.1f}/{'yes' if r['v4']['per_device_GB'] <= 32 else 'no'}"
      for r in rows
    )
  )


if __name__ == "__main__":
  main()
