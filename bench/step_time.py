"""CPU step time of each paper config at batch 2: float32 vs bfloat16, host sync on vs off.

  python bench/step_time.py                                # all four paper configs
  python bench/step_time.py --only occlusion --steps 4

For each paper config (occlusion `B/16`, video_relations `paper`, commonsense `small` and
`medium`) the trainer's own jitted step (`relations.train.trainer.make_train_step`, the config's
mesh over one CPU device) is compiled at `compute_dtype` float32 and bfloat16 (XLA:CPU runs the
bfloat16 matmuls, emulated) and timed on random batches of the real shapes, in two loops:

  * host sync on (the trainer before #37, `check_finite_every=1`): after each step its metrics
    are fetched to the host, and only then is the next batch transferred;
  * host sync off (the trainer now): batches are put on the device two steps ahead
    (`relations.train.prefetch.to_device`) and nothing is fetched until the last step.

Each loop runs 2 warm-up steps, then `--steps` timed steps; the figure is the loop's wall time
per step. Each config runs in its own subprocess (its memory returns after it). Last line:
`step time (CPU, paper configs, batch 2, s/step): occlusion f32 sync <s> nosync <s> bf16 sync <s> nosync <s> |
video_relations ... | commonsense_small ... | commonsense_medium ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
  "occlusion": "configs/occlusion.py:B/16",
  "video_relations": "configs/video_relations.py:paper",
  "commonsense_small": "configs/commonsense.py:small",
  "commonsense_medium": "configs/commonsense.py:medium",
}
TINY = {  # --tiny: the same loops on the tiny variants (a quick check of this script)
  "occlusion": "configs/occlusion.py:tiny",
  "video_relations": "configs/video_relations.py:tiny",
  "commonsense_small": "configs/commonsense.py:tiny",
  "commonsense_medium": "configs/commonsense.py:tiny",
}
BATCH = 2


def _config(spec: str, dtype: str):
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  overrides = [f"compute_dtype={dtype}", "mesh=[('data', 1), ('fsdp', 1)]"]
  if spec.startswith("configs/commonsense.py"):  # no tokenizer files: GPT-2's vocabulary + ours
    overrides.append(f"model.lm.vocab_size={1024 if spec.endswith(':tiny') else 50317}")
  return config_util.load_config(spec, overrides)


def _time_loop(step, state, host_batches, batch_sh, steps: int, sync: bool):
  """(state, seconds per step) of 2 warm-up + `steps` steps, with or without per-step sync."""
  import jax  # pylint: disable=g-import-not-at-top

  from relations.train import prefetch  # pylint: disable=g-import-not-at-top

  put = lambda b: {k: jax.device_put(v, batch_sh[k]) for k, v in b.items()}
  n = len(host_batches)

  def run(count, state):
    if sync:
      for i in range(count):
        state, metrics = step(state, put(host_batches[i % n]))
        jax.device_get(metrics)  # the per-step finiteness check of the old loop
    else:
      items = ((i, host_batches[i % n]) for i in range(count))
      for _, batch in prefetch.to_device(items, put):
        state, metrics = step(state, batch)
      jax.device_get(metrics)
    return state

  state = run(2, state)
  t = time.perf_counter()
  state = run(steps, state)
  return state, (time.perf_counter() - t) / steps


def worker(name: str, steps: int, tiny: bool = False) -> dict:
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update("jax_threefry_partitionable", True)  # as the trainer
  sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]
  import paper_configs  # pylint: disable=g-import-not-at-top

  devices = jax.devices("cpu")[:1]
  spec = (TINY if tiny else CONFIGS)[name]
  out = {"name": name, "config": spec, "device": devices[0].device_kind}
  for dtype in ("float32", "bfloat16"):
    config = _config(spec, dtype)
    step, abstract_state, abstract_in, pieces = paper_configs.build_step(config, devices, BATCH)
    t = time.perf_counter()
    compiled = step.lower(abstract_state, abstract_in).compile()
    out[f"{dtype}_compile_s"] = time.perf_counter() - t
    shapes = paper_configs.abstract_batch(config, BATCH)
    host = [paper_configs.random_batch(shapes, seed) for seed in range(2)]
    with jax.set_mesh(pieces["mesh"]):
      state = jax.jit(pieces["init_fn"], out_shardings=pieces["state_sh"])(jax.random.key(0))
      for sync in (True, False):
        state, s = _time_loop(compiled, state, host, pieces["batch_sh"], steps, sync)
        out[f"{dtype}_{'sync' if sync else 'nosync'}_s"] = s
    del state
  return out


def _fmt(res: dict | None, name: str) -> str:
  if res is None:
    return f"{name} FAILED"
  parts = [name]
  for dtype, short in (("float32", "f32"), ("bfloat16", "bf16")):
    parts.append(f"{short} sync {res[f'{dtype}_sync_s']:.3g} nosync {res[f'{dtype}_nosync_s']:.3g}")
  return " ".join(parts)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--only", nargs="*", choices=sorted(CONFIGS), default=None)
  ap.add_argument("--steps", type=int, default=3, help="timed steps per loop (after 2 warm-up)")
  ap.add_argument("--timeout_s", type=float, default=1200.0, help="per config")
  ap.add_argument("--tiny", action="store_true", help="tiny variants (a quick check)")
  ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.worker:
    print("RESULT " + json.dumps(worker(args.worker, args.steps, args.tiny)), flush=True)
    return
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  env.pop("XLA_FLAGS", None)  # one CPU device, whatever the caller set
  names = args.only or list(CONFIGS)
  print(f"load {os.getloadavg()}; batch {BATCH}, {args.steps} timed steps per loop", flush=True)
  results = {}
  for name in names:
    t = time.perf_counter()
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--steps", str(args.steps)]
    cmd += ["--tiny"] if args.tiny else []
    try:
      res = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=args.timeout_s, check=False, cwd=ROOT
      )
      log = res.stdout + res.stderr
    except subprocess.TimeoutExpired:
      log = f"(timed out after {args.timeout_s:.0f} s)"
    lines = [x for x in log.splitlines() if x.startswith("RESULT ")]
    results[name] = json.loads(lines[-1][len("RESULT ") :]) if lines else None
    r = results[name]
    if r is None:
      tail = "\n".join("    " + x for x in log.splitlines()[-20:])
      print(f"[{name}] FAILED after {time.perf_counter() - t:.0f} s:\n{tail}", flush=True)
      continue
    print(
      f"[{name}] {r['config']} on {r['device']}: compile f32 {r['float32_compile_s']:.0f} s, "
      f"bf16 {r['bfloat16_compile_s']:.0f} s; {_fmt(r, 's/step:')} "
      f"(worker {time.perf_counter() - t:.0f} s)",
      flush=True,
    )
  print(f"load {os.getloadavg()}", flush=True)
  what = "tiny configs" if args.tiny else "paper configs"
  print(
    f"step time (CPU, {what}, batch 2, s/step): " + " | ".join(_fmt(results[n], n) for n in names)
  )


if __name__ == "__main__":
  main()
