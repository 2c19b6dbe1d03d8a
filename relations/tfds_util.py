"""Build-if-missing for our manual-download TFDS builders, safe under several processes.

TFDS writes into an `incomplete.*` directory and renames it when done, so a killed build leaves
nothing that looks prepared. With several JAX processes sharing a data directory only process 0
builds; the others wait at a barrier and then open the finished dataset.
"""

from __future__ import annotations

import tensorflow_datasets as tfds


def ensure_built(builder_cls, data_dir: str, manual_dir: str | None, config=None,
                 file_format: str = "array_record"):
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

  builder = builder_cls(config=config, data_dir=data_dir, file_format=file_format)
  if builder.is_prepared():
    return builder
  if manual_dir is None:
    raise FileNotFoundError(
        f"Dataset {builder.name}/{builder.builder_config.name if builder.builder_config else ''}"
        f" is not prepared in {data_dir} and no manual_dir was given to build it from.\n"
        f"{getattr(builder, 'MANUAL_DOWNLOAD_INSTRUCTIONS', '')}")
  if jax.process_index() == 0:
    from relations import console  # pylint: disable=g-import-not-at-top
    config_name = builder.builder_config.name if builder.builder_config else ""
    with console.stage(f"building TFDS {builder.name}/{config_name} from {manual_dir}",
                       prefix="[data]"), console.quiet_tfds_build():
      builder.download_and_prepare(
          download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices(f"tfds_build_{builder.name}")
    builder = builder_cls(config=config, data_dir=data_dir, file_format=file_format)
  return builder
