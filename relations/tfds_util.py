"""Build-if-missing for our manual-download TFDS builders, safe under several processes.

TFDS writes into an `incomplete.*` directory and renames it when done, so a killed build leaves
nothing that looks prepared. With several JAX processes sharing a data directory only process 0
builds; the others wait at a barrier and then open the finished dataset. A dataset prepared
elsewhere (`tfds build`, on Beam) is only read: a read-only `data_dir`, e.g. a bucket, works.

`BeamOrGenerator` lets one builder prepare either in-process or on Apache Beam.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time

import numpy as np
import tensorflow_datasets as tfds

from relations import tfds_damage


def ensure_built(
  builder_cls, data_dir: str, manual_dir: str | None, config=None, file_format: str = "array_record"
):
  """Returns a prepared builder, building it from `manual_dir` first if needed.

  Args:
    builder_cls: a `tfds.core.GeneratorBasedBuilder` subclass.
    data_dir: the TFDS data directory (prepared datasets live under it).
    manual_dir: the directory holding the official release files (read when building).
    config: builder config name or object, or None for the default.
    file_format: "array_record" (random access for the trainer's `as_data_source`).

  Raises:
    FileNotFoundError: the dataset is not prepared and `manual_dir` is not given.
  """
  import jax  # pylint: disable=g-import-not-at-top

  builder = _open(builder_cls, config, data_dir, file_format)
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    seen = multihost_utils.process_allgather(np.array([builder.is_prepared()], np.int32))
    if np.all(seen):  # one shared copy, or a copy prepared on every node beforehand
      return builder
    # Process 0 builds for everyone: only right if everyone reads what it writes.
    check_shared_data_dir(data_dir)
  elif builder.is_prepared():
    return builder
  if manual_dir is None:
    raise FileNotFoundError(
      f"Dataset {builder.name}/{builder.builder_config.name if builder.builder_config else ''}"
      f" is not prepared in {data_dir} and no manual_dir was given to build it from.\n"
      f"{getattr(builder, 'MANUAL_DOWNLOAD_INSTRUCTIONS', '')}"
    )
  if jax.process_index() == 0:
    from relations import console  # pylint: disable=g-import-not-at-top

    config_name = builder.builder_config.name if builder.builder_config else ""
    with (
      console.stage(
        f"building TFDS {builder.name}/{config_name} from {manual_dir}", prefix="[data]"
      ),
      console.quiet_tfds_build(),
      _sigterm_interrupts(f"the build of {builder.name}"),
    ):
      remove_stale_incomplete(builder.data_dir)
      builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
      )
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    multihost_utils.sync_global_devices(f"tfds_build_{builder.name}")
    builder = _open(builder_cls, config, data_dir, file_format)
  return builder


# A build's `incomplete.*` folder untouched this long belongs to a build that was killed.
STALE_INCOMPLETE_SECONDS = 3600


def remove_stale_incomplete(version_dir: str, max_age: float = STALE_INCOMPLETE_SECONDS) -> list:
  """Removes `incomplete.*` folders of killed builds of `version_dir` (TFDS builds in
  `<parent>/incomplete.<random>_<version>/`; a SIGKILL leaves it behind). A folder where
  anything changed within `max_age` seconds may be a live build elsewhere and is kept.

  Returns the removed folders.
  """

  parent, version = os.path.split(os.path.normpath(str(version_dir)))
  if "://" in parent or not os.path.isdir(parent):
    return []
  removed = []
  for name in sorted(os.listdir(parent)):
    path = os.path.join(parent, name)
    if not (name.startswith("incomplete.") and name.endswith(f"_{version}")):
      continue
    newest = max(
      [os.path.getmtime(path)]
      + [os.path.getmtime(os.path.join(r, f)) for r, ds, fs in os.walk(path) for f in fs + ds]
    )
    if time.time() - newest > max_age:
      print(f"[data] removing {path}: left by a build that was killed", file=sys.stderr)
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed


class _Terminated(KeyboardInterrupt):
  """SIGTERM during a dataset build (a KeyboardInterrupt: the CLIs report `interrupted`)."""


def _sigterm_interrupts(what: str):
  """Context manager: SIGTERM raises `_Terminated` in the main thread, so the build's `finally`
  blocks (TFDS removes its `incomplete.*` folder) run instead of the process just dying."""

  @contextlib.contextmanager
  def cm():
    if threading.current_thread() is not threading.main_thread():
      yield
      return

    def handler(signum, frame):  # pylint: disable=unused-argument
      print(f"[data] SIGTERM: stopping {what} and removing its unfinished files", file=sys.stderr)
      raise _Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
      yield
    finally:
      signal.signal(signal.SIGTERM, old)

  return cm()


def check_shared_data_dir(data_dir: str) -> None:
  """With several JAX processes: refuses a local `data_dir` that the processes do not share.

  Process 0 writes a marker with a random token into `data_dir`; every process looks for it. A
  node-local directory (the configs' default /tmp/..., a local SSD) is a different directory on
  every node, so process 0 would build the dataset where only its own node sees it. A bucket
  (gs://...) is shared by construction and not checked. Called on every process (collective).

  Raises:
    ValueError: naming `data.data_dir` and the processes that do not see process 0's marker.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  if jax.process_count() == 1 or "://" in str(data_dir):
    return
  token = int(np.random.default_rng().integers(1, 2**31))
  token = int(multihost_utils.broadcast_one_to_all(np.array(token, np.int64)))
  marker = os.path.join(str(data_dir), f".relations_shared_check_{token}")
  if jax.process_index() == 0:
    os.makedirs(str(data_dir), exist_ok=True)
    with open(marker, "w") as f:
      f.write(str(token))
  multihost_utils.sync_global_devices(f"data_dir_marker_{token}")
  try:
    with open(marker) as f:
      seen = f.read() == str(token)
  except OSError:
    seen = False
  flags = multihost_utils.process_allgather(np.array([seen], np.int32)).reshape(-1)
  if jax.process_index() == 0:
    os.remove(marker)
  missing = [i for i, f in enumerate(flags) if not f]
  if missing:
    raise ValueError(
      f"data.data_dir={data_dir} is local to each host: process(es) {missing} of "
      f"{jax.process_count()} do not see the files process 0 writes there, so a dataset built "
      "there would exist on one node only. Use a directory every process shares (a bucket "
      "gs://..., a shared file system) with --config.data.data_dir=..., or prepare the dataset "
      "on every node beforehand (python -m relations.datasets.prepare --data_dir ... on each)."
    )


def _open(builder_cls, config, data_dir, file_format):
  """The builder of `data_dir` (reads only); a dataset prepared in another format is refused.

  A damaged `dataset_info.json` or shard is reported naming the file (`relations.tfds_damage`).
  """
  try:
    return tfds_damage.open_checked(
      lambda: builder_cls(config=config, data_dir=data_dir, file_format=file_format),
      os.path.join(str(data_dir), builder_cls.name),
    )
  except ValueError as e:
    # A dataset prepared elsewhere, e.g. by `tfds build` without `--file_format array_record`.
    if "File format is already set" not in str(e):
      raise
    raise ValueError(
      f"{builder_cls.name} (config {config}) in {data_dir} was prepared as another file "
      f"format ({e}); the trainer reads {file_format}. Rebuild with `tfds build ... "
      f"--file_format {file_format}` or convert it with `tfds convert_format --dataset_dir "
      f"DIR --out_file_format {file_format}`."
    ) from e


open_builder = _open  # for `relations.datasets.prepare`
sigterm_interrupts = _sigterm_interrupts


# Beam counters of `BeamOrGenerator` builds: "<split>/items" and "<split>/examples".
BEAM_COUNTER_NAMESPACE = "relations.tfds_util"


class BeamExamplesLostError(RuntimeError):
  """A Beam build wrote fewer examples than the per-item function yielded (see `BeamOrGenerator`)."""


class BeamOrGenerator:
  """Mixin for a `tfds.core.GeneratorBasedBuilder`: one per-item function, two engines.

  `_generate_examples` lists its inputs (files, image ids, record groups) in the driver and hands
  them with a per-item function to `self.key_examples(items, fn)`. That returns

    - a plain generator of `(key, example)` when the build has no Beam options (the default
      install, the demo, `ensure_built`): nothing imports apache_beam;
    - a `beam.PTransform` (`Create(items) | FlatMap(fn)`; Create reshuffles) when the caller passed
      `beam_options` or `beam_runner` in the DownloadConfig, e.g. `tfds build
      --beam_pipeline_options=...`. TFDS applies it to its pipeline and encodes, shuffles and writes
      the examples on the Beam workers.

  Both engines call the same `fn` on the same items, and TFDS orders records by the hash of the
  key in both, so the prepared files hold the same records (tested per dataset). `fn(item)` must be
  picklable (a module-level function or a `functools.partial` of one) and yield `(key, example)`.
  List this class before the TFDS base class: `class Builder(BeamOrGenerator, GeneratorBasedBuilder)`.

  Completeness check of a Beam build: the FlatMap counts, per split, the items it processed and
  the examples `fn` yielded (Beam counters in `BEAM_COUNTER_NAMESPACE`). After the pipeline the
  build fails with `BeamExamplesLostError` unless every listed item was processed once and the
  split holds exactly as many examples as were yielded; the unfinished dataset is then removed
  (TFDS builds in an `incomplete.*` directory). Beam 2.77's FnApiRunner can drop a chunk of a
  stage's input on its way to a worker process (the runner's data channel flushes on a 1-second
  timer without holding its buffer's writers off; measured: 5-27 of 175 RealOOB training examples
  missing in each of 7 two-worker builds run with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, none in
  the default setup's builds), and TFDS's writer does not compare what it wrote with what it was
  given. `beam_counts` holds the counts of the last Beam build (None without counters, e.g. a
  runner that reports no metrics: then nothing is checked).
  """

  _use_beam = False
  _beam_expected_items: dict | None = None
  beam_counts: dict | None = None

  def _download_and_prepare(self, dl_manager, download_config):
    # TFDS creates its Beam pipeline only when asked (`beam_options` / `beam_runner`); the
    # builder has to know before `_generate_examples` returns which kind of object to return.
    self._use_beam = (
      download_config.beam_runner is not None or download_config.beam_options is not None
    )
    self._beam_expected_items = {}
    self.beam_counts = None
    try:
      out = super()._download_and_prepare(
        dl_manager, download_config
      )  # pytype: disable=attribute-error
      if self._use_beam and self.beam_counts is not None:
        check_beam_counts(
          self.name,
          self._beam_expected_items,
          self.beam_counts,
          {name: split.num_examples for name, split in self.info.splits.items()},
        )
      return out
    finally:
      self._use_beam = False

  def _process_pipeline_result(self, pipeline_result):
    """TFDS hook, called once the Beam pipeline finished: reads this build's counters."""
    super()._process_pipeline_result(pipeline_result)  # pytype: disable=attribute-error
    self.beam_counts = read_beam_counts(pipeline_result)

  @property
  def building_with_beam(self) -> bool:
    """True while `download_and_prepare` runs with Beam options or a Beam runner."""
    return self._use_beam

  def key_examples(self, items, fn):
    """`(key, example)` of every item: a generator, or a Beam PTransform under Beam.

    Args:
      items: sequence of picklable per-example (or per-group) inputs, in the order the plain
        path yields them.
      fn: `fn(item) -> iterable of (key, example)`; picklable.
    """
    items = list(items)
    if not self.building_with_beam:
      return (key_example for item in items for key_example in fn(item))
    if self._beam_expected_items is None:
      self._beam_expected_items = {}
    return _key_examples_transform(items, fn, self._beam_expected_items)


def _key_examples_transform(items, fn, expected_items: dict):
  """`Create(items) | FlatMap(fn)`, counted under the label TFDS applies it with."""
  beam = tfds.core.lazy_imports.apache_beam

  class KeyExamples(beam.PTransform):
    def expand(self, pbegin):
      # TFDS applies the transform as `split_name >> transform`: the label is the split.
      expected_items[self.label] = len(items)
      return (
        pbegin
        # Create reshuffles its items: they spread over the workers (measured: 40 items, 20 per
        # worker process). A second Reshuffle only added a shuffle stage.
        | "Create" >> beam.Create(items, reshuffle=True)
        | "Examples" >> beam.FlatMap(_counted_key_examples, item_fn=fn, split=self.label)
      )

  return KeyExamples()


def _counted_key_examples(item, item_fn, split):
  """Yields `item_fn(item)`; then counts the item and its examples under `split` (Beam workers)."""
  from apache_beam.metrics import Metrics  # pylint: disable=g-import-not-at-top

  n = 0
  for key_example in item_fn(item):
    n += 1
    yield key_example
  Metrics.counter(BEAM_COUNTER_NAMESPACE, f"{split}/examples").inc(n)
  Metrics.counter(BEAM_COUNTER_NAMESPACE, f"{split}/items").inc()


def read_beam_counts(pipeline_result) -> dict | None:
  """{split: {"items": n, "examples": n}} from a finished pipeline's counters, or None.

  None when the runner reports no metrics for our namespace (nothing to check then).
  """
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=g-import-not-at-top

  try:
    counters = pipeline_result.metrics().query(
      MetricsFilter().with_namespace(BEAM_COUNTER_NAMESPACE)
    )["counters"]
  except (NotImplementedError, AttributeError, KeyError):
    return None
  out: dict = {}
  for c in counters:
    split, _, what = c.key.metric.name.rpartition("/")
    value = c.committed if c.committed is not None else c.attempted
    if value is None:
      return None
    out.setdefault(split, {"items": 0, "examples": 0})
    out[split][what] = out[split].get(what, 0) + int(value)
  return out or None


def check_beam_counts(name: str, expected_items: dict, counts: dict, written: dict) -> None:
  """Raises `BeamExamplesLostError` unless every split's items and examples all arrived.

  Args:
    name: the dataset name (for the message).
    expected_items: {split: number of items listed by `_generate_examples`}.
    counts: {split: {"items": processed, "examples": yielded}} (`read_beam_counts`).
    written: {split: examples in the prepared split}.
  """
  problems = []
  for split, n_items in sorted(expected_items.items()):
    got = counts.get(split, {"items": 0, "examples": 0})
    if got["items"] != n_items:
      problems.append(f"split {split}: {n_items} items listed, {got['items']} processed")
    if written.get(split) != got["examples"]:
      problems.append(
        f"split {split}: {got['examples']} examples generated, {written.get(split)} written"
      )
  if problems:
    raise BeamExamplesLostError(
      f"{name}: the Beam pipeline lost data ({'; '.join(problems)}). Nothing was kept; build "
      "again. Beam's FnApiRunner with worker processes can drop a chunk of a stage's input "
      "(see relations.tfds_util.BeamOrGenerator); the in-process build (no "
      "--beam_pipeline_options) and direct_running_mode=in_memory do not move data between "
      "processes."
    )
