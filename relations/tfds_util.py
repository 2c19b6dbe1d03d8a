"""Build-if-missing for our manual-download TFDS builders, safe under several processes.

TFDS writes into an `incomplete.*` directory and renames it when done, so a killed build leaves
nothing that looks prepared. With several JAX processes sharing a data directory only process 0
builds; the others wait at a barrier and then open the finished dataset. A dataset prepared
elsewhere (`tfds build`, on Beam) is only read: a read-only `data_dir`, e.g. a bucket, works.

`BeamOrGenerator` lets one builder prepare either in-process or on Apache Beam.
"""

from __future__ import annotations

import tensorflow_datasets as tfds


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
  if builder.is_prepared():
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
    ):
      builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
      )
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    multihost_utils.sync_global_devices(f"tfds_build_{builder.name}")
    builder = _open(builder_cls, config, data_dir, file_format)
  return builder


def _open(builder_cls, config, data_dir, file_format):
  try:
    return builder_cls(config=config, data_dir=data_dir, file_format=file_format)
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


class BeamOrGenerator:
  """Mixin for a `tfds.core.GeneratorBasedBuilder`: one per-item function, two engines.

  `_generate_examples` lists its inputs (files, image ids, record groups) in the driver and hands
  them with a per-item function to `self.key_examples(items, fn)`. That returns

    - a plain generator of `(key, example)` when the build has no Beam options (the default
      install, the demo, `ensure_built`): nothing imports apache_beam;
    - a `beam.PTransform` (`Create(items) | Reshuffle() | FlatMap(fn)`) when the caller passed
      `beam_options` or `beam_runner` in the DownloadConfig, e.g. `tfds build
      --beam_pipeline_options=...`. TFDS applies it to its pipeline and encodes, shuffles and writes
      the examples on the Beam workers.

  Both engines call the same `fn` on the same items, and TFDS orders records by the hash of the
  key in both, so the prepared files hold the same records (tested per dataset). `fn(item)` must be
  picklable (a module-level function or a `functools.partial` of one) and yield `(key, example)`.
  List this class before the TFDS base class: `class Builder(BeamOrGenerator, GeneratorBasedBuilder)`.
  """

  _use_beam = False

  def _download_and_prepare(self, dl_manager, download_config):
    # TFDS creates its Beam pipeline only when asked (`beam_options` / `beam_runner`); the
    # builder has to know before `_generate_examples` returns which kind of object to return.
    self._use_beam = (
      download_config.beam_runner is not None or download_config.beam_options is not None
    )
    try:
      return super()._download_and_prepare(
        dl_manager, download_config
      )  # pytype: disable=attribute-error
    finally:
      self._use_beam = False

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
    beam = tfds.core.lazy_imports.apache_beam
    # Reshuffle spreads the items over the workers (Create alone may hand all of them to one).
    return beam.Create(items) | "Reshuffle" >> beam.Reshuffle() | "Examples" >> beam.FlatMap(fn)
