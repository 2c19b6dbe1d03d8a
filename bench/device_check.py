"""One command that runs every paper config on whatever devices are present and checks its numerics.

  python bench/device_check.py                    # all four, about 5-7 min on one H100-class GPU
  python bench/device_check.py --only occlusion --steps 3

For each paper config (occlusion `B/16`, video_relations `paper`, commonsense `small` and `medium`)
on the local accelerators (GPU or TPU host; tiny variants when only the CPU is present), the
trainer's own jitted step (`relations.train.trainer.make_train_step`: loss, gradients, optax update,
donated state, the config's mesh and partition rules over all local devices) runs on synthetic
random batches of the right shapes and dtypes (no dataset, no TFDS/grain/TensorFlow/clu), at the
config's compute dtype (`compute_dtype`: auto = bfloat16 on accelerators, float32 on CPU). Printed
per config:
  * compile time: lower + compile of the step at the timing batch (ahead of time);
  * step time: median wall time of `--steps` steps after two warm-up steps, each waited for;
  * MFU: FLOPs of the compiled step (XLA cost analysis, per device) / step time / the device's
    dense bf16 peak (`relations.train.perf.PEAK_TFLOPS`; `--peak_tflops` for others; n/a on CPU);
  * peak device memory: `memory_stats()["peak_bytes_in_use"]` of the worker process (GPU/TPU);
    on CPU, which has no allocator statistics, XLA's buffer assignment of the step (marked "est");
  * loss difference: the same `--ref_steps` steps (same initial parameters, same batches, same
    dropout keys) at a small batch (`--ref_batch` per device) run on the devices at the config's
    compute dtype and on the host CPU in float32; max |loss_device - loss_cpu| over those steps.
    The CPU reference runs at that small batch (not the timing batch) to fit the time budget.

The timing batch is the per-device batch in `CONFIGS` times the local device count ("scaled to
fit": one device holds what the paper's batch puts on one device of an 8-device host, or more
where memory allows); on RESOURCE_EXHAUSTED it is halved once. Each config and each CPU reference
runs in its own subprocess with a timeout, so a failure (printed with its traceback) or an
out-of-memory leaves the others running and its memory is returned. CPU references run beside the
device workers (`--ref_parallel` at a time) on accelerators, after them on CPU.

Last line: `device check: <device> | occlusion <s> s/step MFU <m>% <GB> GB | video_relations ...
| commonsense_small ... | commonsense_medium ...`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (paper config, tiny config for a CPU-only host, per-device timing batch on accelerators)
CONFIGS = {
  "occlusion": ("configs/occlusion.py:B/16", "configs/occlusion.py:tiny", 32),
  "video_relations": ("configs/video_relations.py:paper", "configs/video_relations.py:tiny", 16),
  "commonsense_small": ("configs/commonsense.py:small", "configs/commonsense.py:tiny", 64),
  "commonsense_medium": ("configs/commonsense.py:medium", "configs/commonsense.py:tiny", 32),
}
CPU_BATCH = 2  # per device, tiny configs on a CPU-only host


def peak_tflops(device_kind: str) -> float | None:
  """Dense bf16 peak per chip (the trainer's table, relations/train/perf.py)."""
  from relations.train import perf  # pylint: disable=g-import-not-at-top

  return perf.peak_tflops(device_kind)


# ---------------------------------------------------------------- worker (one subprocess)
def _load(spec: str, tiny: bool, dtype: str):
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  overrides = []
  if spec.startswith("configs/commonsense.py"):  # no tokenizer files: GPT-2's vocabulary + ours
    overrides.append(f"model.lm.vocab_size={1024 if tiny else 50317}")
  config = config_util.load_config(spec, overrides)
  if dtype != "config" and "compute_dtype" in config:
    config = config_util.apply_overrides(config, [f"compute_dtype={dtype}"])
  return config


def _batches(config, batch_size: int, count: int, seed: int):
  import paper_configs  # pylint: disable=g-import-not-at-top

  shapes = paper_configs.abstract_batch(config, batch_size)
  return [paper_configs.random_batch(shapes, seed + i) for i in range(count)]


def _build(config, devices, batch_size):
  import paper_configs  # pylint: disable=g-import-not-at-top

  return paper_configs.build_step(config, devices, batch_size=batch_size)


def _run_losses(step, init, pieces, batches) -> list[float]:
  """Losses of train steps from key(0)'s init on `batches` (host dicts)."""
  import jax  # pylint: disable=g-import-not-at-top

  out = []
  with jax.set_mesh(pieces["mesh"]):
    state = init(jax.random.key(0))
    for b in batches:
      arrays = {k: jax.device_put(v, pieces["batch_sh"][k]) for k, v in b.items()}
      state, metrics = step(state, arrays)
      out.append(float(jax.device_get(metrics["loss"])))
  del state
  return out


def _losses(config, devices, batch_size: int, steps: int) -> list[float]:
  import jax  # pylint: disable=g-import-not-at-top

  step, _, _, pieces = _build(config, devices, batch_size)
  init = jax.jit(pieces["init_fn"], out_shardings=pieces["state_sh"])
  return _run_losses(step, init, pieces, _batches(config, batch_size, steps, seed=100))


def _time_and_losses(config, devices, batch_size: int, steps: int, ref_bs: int, ref_steps: int):
  """Compile time, step time, FLOPs and memory of the step at `batch_size`; then the losses of
  `ref_steps` steps at `ref_bs` (reusing the compiled step when the batch is the same)."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  ref_pool = ref_future = None
  if ref_steps and ref_bs != batch_size:
    # The reference batch's step compiles in a thread beside the timing step's compile (XLA
    # compiles on the host; two modules overlap on its cores) and is waited for before the timed
    # steps, so it never competes with them.
    def build_ref():
      ref_step, ref_state, ref_in, ref_pieces = _build(config, devices, ref_bs)
      return ref_step.lower(ref_state, ref_in).compile(), ref_pieces

    ref_pool = concurrent.futures.ThreadPoolExecutor(1)
    ref_future = ref_pool.submit(build_ref)
  step, abstract_state, abstract_in, pieces = _build(config, devices, batch_size)
  t0 = time.perf_counter()
  lowered = step.lower(abstract_state, abstract_in)
  compiled = lowered.compile()
  compile_s = time.perf_counter() - t0
  ref_compiled = None
  if ref_future is not None:
    t1 = time.perf_counter()
    ref_compiled = ref_future.result()
    ref_pool.shutdown()
    print(f"reference-batch step ready {time.perf_counter() - t1:.1f} s after the timing step")

  def flops_of(stage):
    try:
      cost = stage.cost_analysis()
    except Exception:  # pylint: disable=broad-except
      return 0.0
    cost = cost[0] if isinstance(cost, (list, tuple)) else (cost or {})
    return float(cost.get("flops", 0.0))

  # XLA:GPU's compiled cost analysis counts library GEMMs (cuBLAS/Triton fusions) as ~0 FLOPs
  # (seen on an H200: 0.66 TFLOP for a ViT-B/16 step of ~7); the lowered module's analysis
  # counts every dot. The compiled module is per device; the lowered one is the global step.
  n = len(devices)
  flops = max(flops_of(compiled), flops_of(lowered) / n)
  mem = compiled.memory_analysis()
  est = None
  if mem is not None:
    est = (
      mem.argument_size_in_bytes
      + mem.output_size_in_bytes
      - mem.alias_size_in_bytes
      + mem.temp_size_in_bytes
    )
  init = jax.jit(pieces["init_fn"], out_shardings=pieces["state_sh"])
  batch = _batches(config, batch_size, 1, seed=7)[0]
  times = []
  with jax.set_mesh(pieces["mesh"]):
    state = init(jax.random.key(0))
    arrays = {k: jax.device_put(v, pieces["batch_sh"][k]) for k, v in batch.items()}
    for i in range(steps + 2):
      t = time.perf_counter()
      state, metrics = compiled(state, arrays)
      jax.block_until_ready((state, metrics))
      if i >= 2:
        times.append(time.perf_counter() - t)
    loss = float(jax.device_get(metrics["loss"]))
  del state, arrays
  out = {
    "compile_s": compile_s,
    "step_s": float(np.median(times)),
    "step_s_all": times,
    "flops_per_device": flops,
    "memory_analysis_bytes": est,
    "timing_loss": loss,
    "peak_bytes": _peak_bytes(devices),
  }
  if ref_steps:
    if ref_compiled is not None:
      compiled, pieces = ref_compiled
    out["losses"] = _run_losses(
      compiled, init, pieces, _batches(config, ref_bs, ref_steps, seed=100)
    )
    out["ref_batch"] = ref_bs
  return out


def _peak_bytes(devices):
  peaks = []
  for d in devices:
    try:
      stats = d.memory_stats()
    except Exception:  # pylint: disable=broad-except  (backends without allocator stats)
      stats = None
    if stats and "peak_bytes_in_use" in stats:
      peaks.append(int(stats["peak_bytes_in_use"]))
  return max(peaks) if peaks else None


def worker(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top

  try:
    jax.config.update("jax_threefry_partitionable", True)  # as the trainer
  except AttributeError:  # a JAX where it is the only behaviour
    pass
  sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]  # paper_configs after jax: keeps XLA_FLAGS
  devices = jax.local_devices()
  platform = devices[0].platform
  out = {
    "name": args.name,
    "platform": platform,
    "device_kind": devices[0].device_kind,
    "n_devices": len(devices),
    "jax": jax.__version__,
  }
  if args.mode == "probe":
    return out
  tiny = args.tiny
  spec = CONFIGS[args.name][1 if tiny else 0]
  config = _load(spec, tiny, args.dtype)
  out["config"] = spec
  from relations.train import precision  # pylint: disable=g-import-not-at-top

  out["compute_dtype"] = jax.numpy.dtype(precision.compute_dtype(config)).name
  ref_bs = args.ref_batch * len(devices)
  if args.mode == "ref":
    if args.timing_batch:  # FLOPs of the device's step, from XLA:CPU's analysis of its HLO
      step, abstract_state, abstract_in, _ = _build(config, devices, args.timing_batch)
      cost = step.lower(abstract_state, abstract_in).cost_analysis()
      cost = cost[0] if isinstance(cost, (list, tuple)) else (cost or {})
      out["step_flops"] = float(cost.get("flops", 0.0))
    out["losses"] = _losses(config, devices, ref_bs, args.ref_steps)
    out["ref_batch"] = ref_bs
    return out
  per_dev = CPU_BATCH if tiny else CONFIGS[args.name][2]
  if args.batch:
    per_dev = args.batch
  bs = per_dev * len(devices)
  try:
    out.update(_time_and_losses(config, devices, bs, args.steps, ref_bs, args.ref_steps))
  except Exception as e:  # pylint: disable=broad-except
    if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
      raise
    print(f"{args.name}: batch {bs} did not fit ({str(e).splitlines()[0][:200]}); halving")
    bs //= 2
    out.update(_time_and_losses(config, devices, bs, args.steps, ref_bs, args.ref_steps))
  out["batch"] = bs
  out["examples_per_s"] = bs / out["step_s"]
  peak = args.peak_tflops or peak_tflops(out["device_kind"])
  if platform == "cpu" and not args.peak_tflops:
    peak = None
  out["peak_tflops"] = peak
  out["mfu"] = out["flops_per_device"] / out["step_s"] / (peak * 1e12) if peak else None
  return out


# ---------------------------------------------------------------- driver
def _run_worker(argv: list[str], env: dict, timeout: float) -> tuple[dict | None, str]:
  """(RESULT dict or None, log text) of one worker subprocess."""
  try:
    res = subprocess.run(
      [sys.executable, os.path.abspath(__file__), *argv],
      capture_output=True,
      text=True,
      env=env,
      timeout=max(1.0, timeout),
      check=False,
      cwd=ROOT,
    )
  except subprocess.TimeoutExpired as e:
    text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return None, text + f"\n(timed out after {timeout:.0f} s)"
  result = None
  for line in res.stdout.splitlines():
    if line.startswith("RESULT "):
      result = json.loads(line[len("RESULT ") :])
  log = res.stdout + res.stderr
  if result is None:
    log += f"\n(exit status {res.returncode})"
  return result, log


def _tail(text: str, n: int = 30) -> str:
  lines = [x for x in text.splitlines() if x.strip()]
  return "\n".join("    " + x for x in lines[-n:])


def _fmt_gb(result: dict) -> str:
  if result.get("peak_bytes"):
    return f"{result['peak_bytes'] / 1e9:.1f} GB"
  if result.get("memory_analysis_bytes"):
    return f"{result['memory_analysis_bytes'] / 1e9:.2f} GB est"
  return "? GB"


def _fmt_mfu(result: dict) -> str:
  return f"{100 * result['mfu']:.1f}%" if result.get("mfu") is not None else "n/a"


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--only", nargs="*", choices=sorted(CONFIGS), default=None)
  ap.add_argument("--steps", type=int, default=5, help="timed steps (after 2 warm-up steps)")
  ap.add_argument("--ref_steps", type=int, default=3, help="steps compared with f32 on CPU")
  ap.add_argument("--ref_batch", type=int, default=2, help="per-device batch of that comparison")
  ap.add_argument("--batch", type=int, default=0, help="per-device timing batch (0 = CONFIGS)")
  ap.add_argument("--dtype", default="auto", help="compute_dtype: auto|bfloat16|float32|config")
  ap.add_argument("--size", choices=("auto", "paper", "tiny"), default="auto")
  ap.add_argument(
    "--budget_s", type=float, default=0.0, help="wall-clock budget (0: 450 s, 1500 s on CPU)"
  )
  ap.add_argument("--ref_parallel", type=int, default=2)
  ap.add_argument("--no_ref", action="store_true", help="skip the CPU float32 reference")
  ap.add_argument("--peak_tflops", type=float, default=0.0, help="per-device peak override")
  # Internal: one worker.
  ap.add_argument("--mode", choices=("driver", "probe", "run", "ref"), default="driver")
  ap.add_argument("--name", default="occlusion")
  ap.add_argument("--tiny", action="store_true")
  ap.add_argument("--timing_batch", type=int, default=0)
  args = ap.parse_args(argv)

  if args.mode != "driver":
    try:
      print("RESULT " + json.dumps(worker(args)), flush=True)
    except Exception:  # pylint: disable=broad-except
      traceback.print_exc()
      sys.exit(1)
    return

  start = time.perf_counter()
  deadline = start + (args.budget_s or 450.0)
  left = lambda: deadline - time.perf_counter()
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  probe, log = _run_worker(["--mode", "probe"], env, 120)
  if probe is None:
    print("device check: no devices (probe failed)\n" + _tail(log))
    sys.exit(1)
  accel = probe["platform"] != "cpu"
  if not args.budget_s and not accel:  # XLA:CPU compiles the tiny steps in 30-160 s each
    deadline = start + 1500.0
  tiny = args.size == "tiny" or (args.size == "auto" and not accel)
  device = f"{probe['n_devices']}x {probe['device_kind']} ({probe['platform']})"
  print(f"device: {device}, jax {probe['jax']}; load {os.getloadavg()}", flush=True)
  print(
    f"configs: {'tiny variants (CPU-only host)' if tiny else 'paper'}; compute dtype "
    f"{args.dtype}; reference: float32 on the host CPU, {args.ref_steps} steps at batch "
    f"{args.ref_batch}/device",
    flush=True,
  )
  names = args.only or list(CONFIGS)
  # The video step (4 exact Hungarian matchings as nested while loops) compiles slowest: last, so
  # the others finish inside the budget whatever it takes.
  if not args.only:
    names = sorted(names, key=lambda n: n == "video_relations")
  common = ["--ref_steps", str(args.ref_steps), "--ref_batch", str(args.ref_batch)]
  common += ["--tiny"] if tiny else []
  ref_env = dict(env, JAX_PLATFORMS="cpu")
  ref_futures = {}
  pool = concurrent.futures.ThreadPoolExecutor(max(1, args.ref_parallel))

  def start_refs():
    for name in names:
      argv = ["--mode", "ref", "--name", name, "--dtype", "float32", *common]
      if accel:  # the global batch of the device worker's timing step
        per_dev = args.batch or CONFIGS[name][2]
        argv += ["--timing_batch", str(per_dev * probe["n_devices"])]
      ref_futures[name] = pool.submit(lambda a: _run_worker(a, ref_env, left() - 5), argv)

  if accel and not args.no_ref:
    start_refs()  # beside the device workers: they use the host's other cores
  results, skipped = {}, set()
  for name in names:
    if left() < 20:
      print(f"[{name}] skipped: out of time budget", flush=True)
      skipped.add(name)
      continue
    argv = ["--mode", "run", "--name", name, "--dtype", args.dtype, "--steps", str(args.steps)]
    argv += common + ["--batch", str(args.batch), "--peak_tflops", str(args.peak_tflops)]
    if args.no_ref:
      argv[argv.index("--ref_steps") + 1] = "0"
    t0 = time.perf_counter()
    res, log = _run_worker(argv, env, left() - 5)
    if res is None:
      print(f"[{name}] FAILED after {time.perf_counter() - t0:.0f} s:\n{_tail(log)}", flush=True)
      continue
    results[name] = res
    print(
      f"[{name}] {res['config']} batch {res['batch']} on {res['n_devices']} device(s), "
      f"{res['compute_dtype']}: compile {res['compile_s']:.1f} s, {res['step_s']:.4f} s/step "
      f"({res['examples_per_s']:.1f} examples/s), {res['flops_per_device'] / 1e12:.3f} "
      f"TFLOP/step/device, MFU {_fmt_mfu(res)}, peak {_fmt_gb(res)} "
      f"(worker {time.perf_counter() - t0:.0f} s)",
      flush=True,
    )
  if not accel and not args.no_ref and args.dtype not in ("auto", "float32", "config"):
    start_refs()
  elif not accel:
    print("[all] CPU-only host at float32: the float32 CPU reference is this run (not repeated)")
  for name, fut in ref_futures.items():
    try:
      ref, log = fut.result(timeout=max(1.0, left()))
    except concurrent.futures.TimeoutError:
      ref, log = None, "(timed out)"
    res = results.get(name)
    if ref is None:
      print(f"[{name}] CPU reference FAILED:\n{_tail(log)}", flush=True)
      continue
    if res is not None and ref.get("step_flops") and res.get("peak_tflops"):
      # XLA:GPU's cost analysis of the compiled step misses library GEMMs; XLA:CPU's of the
      # unoptimised step counts every dot (the same HLO; a halved OOM batch is not covered).
      per_dev = ref["step_flops"] / res["n_devices"]
      same_batch = res["batch"] == (args.batch or CONFIGS[name][2]) * res["n_devices"]
      if per_dev > res["flops_per_device"] and same_batch:
        res["flops_per_device"] = per_dev
        res["mfu"] = per_dev / res["step_s"] / (res["peak_tflops"] * 1e12)
        print(
          f"[{name}] MFU from the CPU-lowered step's {per_dev / 1e12:.2f} TFLOP/device: "
          f"{_fmt_mfu(res)}",
          flush=True,
        )
    if res is None or "losses" not in res:
      continue
    diffs = [abs(a - b) for a, b in zip(res["losses"], ref["losses"])]
    rel = max(d / max(abs(b), 1e-12) for d, b in zip(diffs, ref["losses"]))
    res["loss_diff"] = max(diffs)
    print(
      f"[{name}] loss vs float32 CPU, {len(diffs)} steps at batch {ref['ref_batch']}: "
      f"device {', '.join(f'{x:.5f}' for x in res['losses'])} | cpu "
      f"{', '.join(f'{x:.5f}' for x in ref['losses'])} | max |diff| {max(diffs):.2e} "
      f"(rel {rel:.2e})",
      flush=True,
    )
  pool.shutdown(wait=False, cancel_futures=True)
  parts = []
  for name in CONFIGS:
    if name not in names:
      continue
    res = results.get(name)
    if res is None:
      parts.append(f"{name} {'skipped (time budget)' if name in skipped else 'FAILED'}")
      continue
    part = f"{name} {res['step_s']:.3g} s/step MFU {_fmt_mfu(res)} {_fmt_gb(res)}"
    parts.append(part)
  print(f"total {time.perf_counter() - start:.0f} s; load {os.getloadavg()}", flush=True)
  print(f"device check: {device} | " + " | ".join(parts), flush=True)


if __name__ == "__main__":
  main()
