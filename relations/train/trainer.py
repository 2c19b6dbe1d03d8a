"""The one trainer: mesh -> data -> model -> shard -> step -> checkpoint -> evals -> loop.

Every task goes through `train(config, workdir)`; the task is chosen by `config.task`, a module
(`relations.<name>.task` or a dotted path) that provides the model, data source, preprocessing,
init and loss (see docs/CONTRACT.md). Evaluators are looked up by `config.evals.<name>.type`.

State is a plain dict {"params", "opt", "step"}. Init is shape-first: `jax.eval_shape` gives the
state's shapes, the partition rules give its shardings, and `jax.jit(init, out_shardings=...)`
materialises it already sharded. The train step is one jitted, donated function with explicit
shardings; its RNG is `fold_in(key(seed), step)`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import signal
import time
from typing import Any

from absl import logging
from etils import epath
import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from relations import io_util
from relations.train import checkpoint as ckpt_lib
from relations.train import config_util
from relations.train import disk_full
from relations.train import input_pipeline
from relations.train import optim
from relations.train import perf
from relations.train import prefetch
from relations.train import sharding
from relations.train import startup_stop
from relations.train import summaries
from relations.train import workdir_lock


def import_by_name(kind: str, name: str):
  """`relations.<name>.<kind>` (a task package's module), or `name` itself when it is dotted."""
  candidates = [name] if "." in name else [f"relations.{name}.{kind}"]
  errors = []
  for mod in candidates:
    try:
      return importlib.import_module(mod)
    except ModuleNotFoundError as e:
      if e.name is None or not mod.startswith(e.name):
        raise  # The module exists but one of its imports is missing: surface that.
      errors.append(mod)
  raise ValueError(f"No {kind} module named {name!r} (tried {errors})")


class NonFiniteLossError(FloatingPointError):
  """Raised when a logged metric is NaN/Inf; the last checkpoint is left untouched."""


@dataclasses.dataclass
class TrainResult:
  state: dict
  step: int
  preempted: bool
  steps_per_sec: float
  eval_metrics: dict


def _setting(config, key: str):
  """A trainer setting of `config`, or its default (config_util.TRAINER_DEFAULTS)."""
  return config.get(key, config_util.TRAINER_DEFAULTS[key])


class _Preemption:
  """Turns SIGTERM into a flag the loop checks after each step (then saves and exits)."""

  def __init__(self):
    self.requested = False
    self._old = None

  def __enter__(self):
    try:
      self._old = signal.signal(signal.SIGTERM, self._handler)
    except ValueError:  # not in the main thread (e.g. inside some test runners)
      self._old = None
    return self

  def _handler(self, signum, frame):  # pylint: disable=unused-argument
    startup_stop.check()  # during the first step (compiling): stop at once, nothing to save
    logging.warning("SIGTERM received: saving a checkpoint after this step and exiting.")
    self.requested = True

  def __exit__(self, *exc):
    if self._old is not None:
      signal.signal(signal.SIGTERM, self._old)

  def agreed(self, step: int, sync_every: int) -> bool:
    """Whether every process stops after `step`.

    A pod's hosts get SIGTERM at different moments; a host that stopped alone
    would leave the others blocked in the next collective (or in a
    checkpoint save it never joins). With several processes the flags are
    all-gathered every `sync_every` steps, at the same steps everywhere, and
    all processes stop together if any was asked to.
    """
    if jax.process_count() == 1:
      return self.requested
    if step % sync_every:
      return False
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    flags = multihost_utils.process_allgather(np.array([self.requested], np.int32))
    return bool(np.any(flags))


def _eta(seconds: float) -> str:
  if not np.isfinite(seconds):
    return "?"
  seconds = round(seconds)
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  if seconds >= 60:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds}s"


class _ProgressLine:
  """Prints `[train] step S/T  loss L  R steps/s  ETA E` every `every_seconds` of wall clock.

  Wall-clock, not step, intervals: a line every few seconds whatever the step time, so a slow
  paper-scale run and a fast tiny one both show steady progress. The rate excludes the first
  (compiling) step. Printed by the lead process only; reading the loss syncs with the device
  only at those moments.
  """

  def __init__(self, total_steps: int, every_seconds: float, enabled: bool):
    self.total, self.every, self.enabled = total_steps, every_seconds, enabled
    self.next_at = None

  def __call__(self, done: int, metrics, t0, timed_steps: int) -> None:
    if not self.enabled:
      return
    now = time.perf_counter()
    if self.next_at is not None and now < self.next_at and done != self.total:
      return
    self.next_at = now + self.every
    loss = float(jax.device_get(metrics["loss"]))
    rate = timed_steps / (now - t0) if t0 is not None and timed_steps and now > t0 else float("nan")
    eta = (self.total - done) / rate if rate > 0 else float("nan")
    rate_s = f"{rate:.2f} steps/s" if np.isfinite(rate) else "(first step, with compilation)"
    print(
      f"[train] step {done}/{self.total}  loss {loss:.4f}  {rate_s}  ETA {_eta(eta)}", flush=True
    )


def _make_writer(workdir: str, tensorboard: bool = True):
  """clu writer: TensorBoard events in `workdir` (lead process, if `tensorboard`) and the log.

  The events go through TensorFlow's own file system (its GCS client for gs://).
  """
  from clu import metric_writers  # pylint: disable=g-import-not-at-top  (imports TF: ~8 s)

  return metric_writers.create_default_writer(
    workdir, just_logging=jax.process_index() > 0 or not tensorboard, asynchronous=True
  )


def check_batch_divides(config, mesh) -> None:
  """Refuses, before anything compiles, a global batch the mesh's batch axes cannot split.

  Raises:
    ValueError: naming `input.batch_size`, its value and the number of devices it is split over.
  """
  axes = [a for a in sharding.BATCH_AXES if a in mesh.axis_names]
  n = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
  gb = int(config.input.batch_size)
  if gb % n:
    raise ValueError(
      f"input.batch_size={gb} does not divide over the {n} devices of the mesh's batch axes "
      f"{'x'.join(f'{a}={mesh.shape[a]}' for a in axes)} ({jax.device_count()} devices in all); "
      f"use a multiple of {n} (--config.input.batch_size=...) or fewer devices (--config.mesh)"
    )


def _flat_hparams(config: ml_collections.ConfigDict) -> dict[str, Any]:
  flat = {}

  def walk(d, prefix):
    for k, v in d.items():
      if isinstance(v, (dict, ml_collections.ConfigDict)):
        walk(v, f"{prefix}{k}.")
      elif isinstance(v, (int, float, str, bool)):
        flat[f"{prefix}{k}"] = v
      else:
        flat[f"{prefix}{k}"] = str(v)

  walk(config.to_dict(), "")
  return flat


def make_train_step(model, task, config, tx, schedule, state_sh, batch_sh, repl):
  """The jitted, donated train step (state, batch) -> (state, metrics)."""
  base_rng = jax.random.key(int(config.seed))
  accum = int(_setting(config, "grad_accum_steps"))

  def loss_and_grads(params, batch, rng):
    def loss_fn(p):
      return task.loss_fn(model, p, batch, rng, config)

    return jax.value_and_grad(loss_fn, has_aux=True)(params)

  def step_fn(state, batch):
    step = state["step"]
    rng = jax.random.fold_in(base_rng, step)
    params = state["params"]
    if accum == 1:
      (loss, aux), grads = loss_and_grads(params, batch, rng)
    else:
      # Microbatch i is rows i, i + accum, i + 2 accum, ... of the global batch: each device's
      # contiguous shard of B/n rows holds B/(n accum) rows of every microbatch, so the split is
      # local ([B] -> [B/accum, accum] -> [accum, B/accum], still sharded over the batch axis)
      # and the scan runs on every device's own rows; a [accum, B/accum] reshape would put each
      # microbatch on a subset of devices and gather it inside the loop.
      def split(x, sh):
        x = jnp.moveaxis(x.reshape(x.shape[0] // accum, accum, *x.shape[1:]), 1, 0)
        spec = jax.sharding.PartitionSpec(None, *sh.spec)
        return jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(sh.mesh, spec))

      micro = {k: split(v, batch_sh[k]) for k, v in batch.items()}

      def body(carry, xs):
        i, mb = xs
        (l, a), g = loss_and_grads(params, mb, jax.random.fold_in(rng, i))
        g_sum, l_sum, a_sum = carry
        return (jax.tree.map(jnp.add, g_sum, g), l_sum + l, jax.tree.map(jnp.add, a_sum, a)), None

      zeros_g = jax.tree.map(jnp.zeros_like, params)
      aux_shape = jax.eval_shape(
        lambda: loss_and_grads(params, jax.tree.map(lambda x: x[0], micro), rng)[0][1]
      )
      zeros_a = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), aux_shape)
      (grads, loss, aux), _ = jax.lax.scan(
        body, (zeros_g, jnp.zeros((), jnp.float32), zeros_a), (jnp.arange(accum), micro)
      )
      grads = jax.tree.map(lambda g: g / accum, grads)
      loss = loss / accum
      aux = jax.tree.map(lambda a: a / accum, aux)
    updates, opt = tx.update(grads, state["opt"], params)
    params = optax.apply_updates(params, updates)
    metrics = {
      "loss": loss,
      **aux,
      "grad_norm": optax.tree.norm(grads),
      "learning_rate": schedule(step),
    }
    return {"params": params, "opt": opt, "step": step + 1}, metrics

  return jax.jit(
    step_fn, in_shardings=(state_sh, batch_sh), out_shardings=(state_sh, repl), donate_argnums=(0,)
  )


def _check_finite(metrics: dict[str, float], step: int) -> None:
  for k, v in metrics.items():
    if not np.all(np.isfinite(v)):
      raise NonFiniteLossError(
        f"Non-finite metric {k!r} = {v} at step {step}; stopping. The last checkpoint "
        "(before this step) is intact; lower the learning rate or check the input."
      )


def _maybe_load_pretrained(task, config, state, state_sh):
  """Applies the task's optional `load_pretrained(config, params) -> params` after a fresh init.

  Used for external checkpoints (big_vision ViT .npz, Hugging Face GPT-2 safetensors). Only runs
  when no checkpoint is being resumed, so a restart never overwrites trained weights.
  """
  loader = getattr(task, "load_pretrained", None)
  if loader is None:
    return state
  params = loader(config, state["params"])
  if params is state["params"]:
    return state
  params = jax.device_put(params, state_sh["params"])
  return {**state, "params": params}


def _run_eval(name, ev, params, step, progress, is_lead, fatal: bool) -> dict:
  """`ev.run(params, step)`; a failure is logged with its cause and gives {} (raised if `fatal`).

  The step's checkpoint is already saved, so a broken scorer (e.g. one that needs a tool the
  machine lacks) costs that evaluation only, not the run and not a crash loop on every restart.
  """
  with progress.timed(f"eval_{name}"):
    t_eval = time.perf_counter()
    if is_lead:
      print(f"[eval] {name} at step {step} ...", flush=True)
    try:
      res = ev.run(params, step)
    except Exception as e:  # pylint: disable=broad-except
      if fatal:
        raise
      logging.exception("Evaluation %r at step %d failed; training goes on", name, step)
      if is_lead:
        print(
          f"[eval] {name} at step {step}: FAILED ({type(e).__name__}: {e}); training goes on "
          "(--config.eval_errors_fatal=true stops here instead)",
          flush=True,
        )
      return {}
    if is_lead:
      print(
        f"[eval] {name} at step {step}: done in {time.perf_counter() - t_eval:.1f} s", flush=True
      )
  return res


def _under(workdir, *parts) -> str:
  """`workdir/part/...` as a string, through epath: a gs:// workdir stays a URL (never made
  absolute against the current directory), a local one stays the same local path."""
  return os.fspath(io_util.epath(workdir).joinpath(*parts))


def build_evaluators(model, config, workdir):
  evals = {}
  for name, cfg in (config.get("evals") or {}).items():
    module = import_by_name("evaluator", cfg.type)
    evals[name] = module.Evaluator(
      model=model, config=config, eval_config=cfg, workdir=_under(workdir, "eval", name)
    )
  return evals


def setup(config, devices=None):
  """Mesh, task, model, data, optimizer and sharded abstract state (no params materialised).

  Args:
    config: the run's config.
    devices: devices for the mesh (default: all global devices).

  Returns a dict with keys mesh, task, model, stream, tx, schedule, init_fn, state_shapes,
  state_sh, batch_sh, repl.
  """
  mesh = sharding.make_mesh(config.mesh, devices)
  check_batch_divides(config, mesh)
  task = import_by_name("task", config.task)
  model = task.make_model(config)
  source = task.make_train_source(config)
  stream = input_pipeline.TrainStream(
    source,
    functools.partial(task.preprocess_train, config=config),
    int(config.input.batch_size),
    int(config.seed),
    num_threads=int(config.input.get("num_threads", 2)),
    num_workers=int(config.input.get("num_workers", 0)),
  )
  tx, schedule = optim.make_optimizer(config)

  # Shapes of one global batch, from one preprocessed example.
  example = task.preprocess_train(source[0], np.random.default_rng(0), config)
  global_bs = int(config.input.batch_size)
  batch_shapes = {
    k: jax.ShapeDtypeStruct((global_bs, *np.shape(v)), np.asarray(v).dtype)
    for k, v in example.items()
  }
  init_batch = {
    k: np.zeros((min(global_bs, 2), *np.shape(v)), np.asarray(v).dtype) for k, v in example.items()
  }

  def init_fn(rng):
    params = task.init_params(model, init_batch, rng)
    params = flax.core.unfreeze(params)
    return {"params": params, "opt": tx.init(params), "step": jnp.zeros((), jnp.int32)}

  state_shapes = jax.eval_shape(init_fn, jax.random.key(int(config.seed)))
  rules = [tuple(r) for r in config.get("partition_rules", [(".*", "fsdp")])]
  state_sh = sharding.infer_shardings(
    state_shapes, rules, mesh, int(_setting(config, "fsdp_min_size"))
  )
  batch_sh = {k: sharding.batch_sharding(mesh) for k in batch_shapes}
  return dict(
    mesh=mesh,
    task=task,
    model=model,
    stream=stream,
    tx=tx,
    schedule=schedule,
    init_fn=init_fn,
    state_shapes=state_shapes,
    state_sh=state_sh,
    batch_sh=batch_sh,
    repl=sharding.replicated(mesh),
  )


def enable_compilation_cache(config) -> str:
  """Turns on JAX's persistent compilation cache in `config.compilation_cache_dir` (or
  $JAX_COMPILATION_CACHE_DIR); every compiled program is cached, however fast it compiled.
  Returns the directory ("" = off)."""
  path = str(_setting(config, "compilation_cache_dir") or "")
  path = path or os.environ.get("JAX_COMPILATION_CACHE_DIR", "")
  if path:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


def train(config: ml_collections.ConfigDict, workdir: str, devices=None) -> TrainResult:
  """Trains `config` in `workdir`, resuming from its latest checkpoint if there is one.

  One run per workdir (`workdir_lock`). A run that already finished (its `train_summary.json`
  says `total_steps` were done and the checkpoint of that step exists) is left as it is.

  Args:
    config: a locked config (see docs/CONTRACT.md for the fields the trainer reads).
    workdir: checkpoints, TensorBoard events, config.json and train_summary.json go here.
    devices: devices for the mesh (default: all global devices; tests pass a subset).
  """
  workdir = io_util.local_abspath(workdir)  # a gs:// URL stays one (never <cwd>/gs:/...)
  io_util.makedirs(workdir)
  lead = jax.process_index() == 0
  # A full disk: one DiskFullError naming the file, the failed save's partial folder removed.
  # SIGTERM before the first step is done: exit 143 at once (nothing new to save).
  with (
    workdir_lock.hold(workdir, enabled=lead),
    disk_full.guard(workdir, lead=lead),
    startup_stop.guard(),
  ):
    finished = _finished_run(config, workdir)
    if finished is not None:
      return finished
    return _train(config, workdir, devices)


def _finished_run(config, workdir: str) -> TrainResult | None:
  """The result of a run in `workdir` that already completed `config.total_steps` (else None).

  A restarted finished run (a requeued job, a repeated command) must not rewrite its results.
  """
  import json  # pylint: disable=g-import-not-at-top

  total = int(config.total_steps)
  # epath, not open()/os.path: a gs:// workdir must be checked in the bucket, not as a local folder.
  root = epath.Path(workdir)
  try:
    summary = json.loads((root / "train_summary.json").read_text())
    final = int(summary["final_step"])
  except (OSError, ValueError, KeyError, TypeError):
    return None
  if final < total or summary.get("preempted"):
    return None
  if not (root / "checkpoints" / str(final)).is_dir():
    return None
  if jax.process_index() == 0:
    print(
      f"[train] {workdir}: this run is complete (step {final} of {total}, see "
      f"train_summary.json); nothing to do. Raise total_steps to train on, or use a new workdir.",
      flush=True,
    )
  sps = summary.get("steps_per_sec")
  evals = {k: v for k, v in summary.items() if "/" in k}
  return TrainResult(
    state=None,
    step=final,
    preempted=False,
    steps_per_sec=float(sps) if isinstance(sps, (int, float)) else float("nan"),
    eval_metrics=evals,
  )


def _train(config: ml_collections.ConfigDict, workdir: str, devices=None) -> TrainResult:
  jax.config.update("jax_threefry_partitionable", True)
  enable_compilation_cache(config)
  is_lead = jax.process_index() == 0

  # ---------------------------------------------------------------- Set up logging
  writer = _make_writer(workdir, bool(_setting(config, "tensorboard")))
  if is_lead:
    io_util.write_text_atomic(_under(workdir, "config.json"), config.to_json_best_effort(indent=2))

  # ---------------------------------------------------------------- Mesh, data, model, optimizer
  s = setup(config, devices)
  mesh, model, task, stream = s["mesh"], s["model"], s["task"], s["stream"]
  total_steps = int(config.total_steps)

  # ---------------------------------------------------------------- Checkpoint or init
  mngr = ckpt_lib.make_manager(
    workdir,
    keep=int(_setting(config, "keep_checkpoints")),
    async_save=bool(_setting(config, "async_checkpoints")),
  )
  with jax.set_mesh(mesh):
    abstract = ckpt_lib.abstract_of(s["state_shapes"], s["state_sh"])
    restored = ckpt_lib.restore_newest_intact(mngr, abstract)  # skips damaged ones, saying so
    if restored is not None:
      state, meta, _ = restored
      if int(meta.get("data_seed", config.seed)) != int(config.seed):
        raise ValueError(
          f"{workdir}: checkpoint was written with seed {meta['data_seed']} but the "
          f"config has seed {config.seed}; use a new workdir"
        )
      start = int(meta["step"])
      bs = int(config.input.batch_size)
      if start and int(meta.get("data_position", start * bs)) != start * bs:
        raise ValueError(
          f"{workdir}: checkpoint of step {start} was written with input.batch_size "
          f"{int(meta['data_position']) // start} but the config has {bs}; the data order would "
          "change. Resume with the same batch size, or use a new workdir"
        )
      logging.info("Resumed from %s at step %d", workdir, start)
    else:
      init = jax.jit(s["init_fn"], out_shardings=s["state_sh"])
      state = init(jax.random.key(int(config.seed)))
      state = _maybe_load_pretrained(task, config, state, s["state_sh"])
      start = 0
      if is_lead:
        writer.write_hparams(_flat_hparams(config))

  step_fn = make_train_step(
    model, task, config, s["tx"], s["schedule"], s["state_sh"], s["batch_sh"], s["repl"]
  )
  # `during_training=False` evaluators (e.g. a blind test split) run only from relations.predict.
  evaluators = {
    n: e
    for n, e in build_evaluators(model, config, workdir).items()
    if config.evals[n].get("during_training", True)
  }

  # ---------------------------------------------------------------- Train loop
  from clu import periodic_actions  # pylint: disable=g-import-not-at-top

  progress = periodic_actions.ReportProgress(
    num_train_steps=total_steps, writer=writer, every_steps=int(_setting(config, "log_every"))
  )
  log_every = int(_setting(config, "log_every"))
  progress_line = _ProgressLine(
    total_steps, float(_setting(config, "progress_every_seconds")), enabled=is_lead
  )
  # 0 (default): at log steps, so the host fetches metrics only when it logs them.
  check_every = int(_setting(config, "check_finite_every")) or log_every
  # Multi-process runs agree on a SIGTERM every this many steps (_Preemption).
  sync_every = max(1, int(_setting(config, "preemption_sync_every")))
  ckpt_every = int(_setting(config, "checkpoint_every"))
  eval_fatal = bool(_setting(config, "eval_errors_fatal"))
  meta = lambda step: {
    "step": step,
    "data_seed": int(config.seed),
    "data_position": step * int(config.input.batch_size),
  }
  eval_metrics: dict[str, float] = {}
  preempted = False
  t0, timed_steps = None, 0
  last_log = None  # (step, perf_counter) at the last logged step
  step_perf = None  # FLOPs / MFU of the step (perf.StepPerf), analysed before the first step
  profiler = perf.Profiler(str(_setting(config, "profile_steps")), workdir)
  step = start
  with _Preemption() as preemption, jax.set_mesh(mesh):
    # Batches go to the devices ahead of the step that uses them (prefetch.to_device); between
    # log/check/checkpoint steps nothing waits for the devices.
    put = lambda local: input_pipeline.to_global(local, mesh)  # noqa: E731
    for step, batch in prefetch.to_device(stream.iterate(start, total_steps), put):
      if step_perf is None:  # lower + compile once: the jitted call below reuses it
        step_perf = perf.StepPerf.for_step(step_fn, (state, batch), config, mesh.devices.flat)
      profiler.before(step)
      state, metrics = step_fn(state, batch)
      done = step + 1
      profiler.after(done, state)
      if t0 is None:  # exclude compilation from the throughput figure
        jax.block_until_ready(state["step"])
        startup_stop.training_started()
        t0, timed_steps = time.perf_counter(), 0
      else:
        timed_steps += 1
      progress(done)
      progress_line(done, metrics, t0, timed_steps)
      if (
        done % check_every == 0
        or done % log_every == 0
        or done % ckpt_every == 0
        or done == total_steps
      ):
        host = jax.device_get(metrics)
        _check_finite(host, done)
        if done % log_every == 0 or done == total_steps:
          scalars = {f"train/{k}": float(v) for k, v in host.items()}
          # Throughput between consecutive log steps (the device_get above waited for the step).
          now = time.perf_counter()
          if last_log is not None and done > last_log[0]:
            rate = (done - last_log[0]) / (now - last_log[1])
            scalars["train/steps_per_sec"] = rate
            scalars["train/examples_per_sec"] = rate * int(config.input.batch_size)
            scalars.update(step_perf.scalars(rate))  # TFLOP/s, MFU
          last_log = (done, now)
          writer.write_scalars(done, scalars)
      # The step's checkpoint first: an evaluation that fails (or is preempted) loses no work.
      stop = preemption.agreed(done, sync_every)
      if done % ckpt_every == 0 or done == total_steps or stop:
        ckpt_lib.save(mngr, done, state, meta(done), force=True)
        summaries.write_param_overview(writer, done, state["params"])  # norms, histograms
      if stop and done < total_steps:  # after the last step's save, the run is complete
        preempted = True
        logging.warning("Preempted: checkpoint saved at step %d", done)
        break
      for name, ev in evaluators.items():
        every = int(config.evals[name].get("every_steps", 0))
        if (every and done % every == 0) or done == total_steps:
          res = _run_eval(name, ev, state["params"], done, progress, is_lead, eval_fatal)
          res = summaries.write_eval(writer, done, name, res)  # scalars + media
          eval_metrics.update({f"{name}/{k}": v for k, v in res.items()})
    if start >= total_steps > 0:
      # Trained to the end before but stopped before its final evaluation finished: run it now.
      for name, ev in evaluators.items():
        res = _run_eval(name, ev, state["params"], start, progress, is_lead, eval_fatal)
        res = summaries.write_eval(writer, start, name, res)  # scalars + media
        eval_metrics.update({f"{name}/{k}": v for k, v in res.items()})
    profiler.close(state)  # a run that ended inside the profiled range
    mngr.wait_until_finished()
  writer.flush()
  elapsed = (time.perf_counter() - t0) if t0 is not None else 0.0
  sps = timed_steps / elapsed if elapsed > 0 and timed_steps else float("nan")
  final_step = int(jax.device_get(state["step"]))
  if is_lead:
    summary = {
      "final_step": final_step,
      "steps_per_sec": sps,
      "preempted": preempted,
      **{k: float(v) for k, v in eval_metrics.items() if np.isscalar(v)},
    }
    io_util.write_json_atomic(_under(workdir, "train_summary.json"), summary)
  mngr.close()
  return TrainResult(
    state=state, step=final_step, preempted=preempted, steps_per_sec=sps, eval_metrics=eval_metrics
  )


def restore_params(
  config: ml_collections.ConfigDict, workdir: str, step: int | None = None, devices=None
):
  """(model, params, step, mesh) from the latest (or given) checkpoint in `workdir`.

  Reads no data: the model comes from the config, the parameter shapes from the checkpoint's
  metadata, their shardings from the config's mesh and partition rules; only `params` is read
  (not the optimizer state). So prediction works with only the evaluation split present.
  """
  mesh = sharding.make_mesh(config.mesh, devices)
  task = import_by_name("task", config.task)
  model = task.make_model(config)
  mngr = ckpt_lib.make_manager(workdir, keep=int(_setting(config, "keep_checkpoints")))
  step = mngr.latest_step() if step is None else step
  directory = str(mngr.directory)
  mngr.close()
  if step is None:
    raise FileNotFoundError(f"No checkpoint in {_under(workdir, 'checkpoints')}")
  state_dir = _under(directory, str(int(step)), "state")
  if not io_util.isdir(state_dir):
    raise FileNotFoundError(f"{state_dir}: no checkpoint of step {step}")
  shapes = {"params": ckpt_lib.read_shapes(state_dir)["params"]}
  rules = [tuple(r) for r in config.get("partition_rules", [(".*", "fsdp")])]
  shardings = sharding.infer_shardings(shapes, rules, mesh, int(_setting(config, "fsdp_min_size")))
  abstract = ckpt_lib.abstract_of(shapes, shardings)["params"]
  with jax.set_mesh(mesh):
    params = ckpt_lib.restore_params(state_dir, abstract)
  return model, params, int(step), mesh
