"""List the project's datasets, or build one without the `tfds build` CLI.

The standard way to build is TFDS's own CLI (it needs the `beam` extra, `pip install -e .[beam]`),
on one machine or on a Beam cluster; see the README, "Preparing the real datasets":

  tfds build --imports relations.datasets vidor --config fps2_short224 --manual_dir ~/vidor \
      --data_dir ~/tensorflow_datasets --file_format array_record \
      --beam_pipeline_options=runner=FnApiRunner,direct_running_mode=multi_processing,direct_num_workers=8

This module adds what that CLI does not:

  python -m relations.datasets.prepare --list        # names, builder configs
  python -m relations.datasets.prepare vidor/fps2_short224 --manual_dir ~/vidor \
      --data_dir ~/tensorflow_datasets                # one process, default install (no Beam)

`--beam_pipeline_options` (same syntax as `tfds build`) runs the same build on Beam when the
`beam` extra is installed. The default file format is array_record, what the trainer reads.
"""

from __future__ import annotations

import sys

from relations import cli_errors
from relations.datasets import BUILDERS

DATASETS = tuple(BUILDERS)


def builder_class(name: str):
  if name not in DATASETS:
    raise cli_errors.InputError(
      f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)} (--list shows their configs)"
    )
  return BUILDERS[name]


@cli_errors.entry_point
def main(argv=None) -> int:
  p = cli_errors.ArgumentParser(
    description=__doc__.strip().splitlines()[0], prog="python -m relations.datasets.prepare"
  )
  p.add_argument("dataset", nargs="?", help="NAME or NAME/CONFIG")
  p.add_argument(
    "--manual_dir", type=cli_errors.existing_dir, help="directory with the official release files"
  )
  p.add_argument("--data_dir", help="TFDS data directory to write to")
  p.add_argument(
    "--file_format", default="array_record", choices=["array_record", "tfrecord", "parquet"]
  )
  p.add_argument(
    "--beam_pipeline_options",
    help="comma-separated Beam pipeline flags, as for `tfds build`; builds on Beam",
  )
  p.add_argument("--list", action="store_true", help="list datasets and builder configs")
  args = p.parse_args(argv)
  if args.list or not args.dataset:
    for name in DATASETS:
      cls = builder_class(name)
      configs = [c.name for c in (cls.BUILDER_CONFIGS or [])]
      print(f"{name}: {', '.join(configs) if configs else '(no configs)'}")
    return 0 if args.list else 2
  if not args.data_dir:
    p.error("--data_dir is required")
  name, _, config = args.dataset.partition("/")
  cls = builder_class(name)
  known = [c.name for c in (cls.BUILDER_CONFIGS or [])]
  if config and config not in known:
    raise cli_errors.InputError(
      f"unknown config {config!r} of dataset {name!r}; choose one of "
      f"{', '.join(known) or '(none: give the bare name)'}"
    )
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  from relations import tfds_util  # pylint: disable=g-import-not-at-top

  # Opening the builder only reads: an already-prepared data_dir (read-only, another user's, a
  # bucket) is used as it is, with no write attempted and no --manual_dir needed.
  builder = tfds_util.open_builder(cls, config or None, args.data_dir, args.file_format)
  if builder.is_prepared():
    print(f"{builder.info.full_name} is already prepared in {args.data_dir}; nothing to do")
  else:
    if not args.manual_dir:
      p.error(f"--manual_dir is required: {name} is not prepared in {args.data_dir} yet")
    if "://" not in args.data_dir:
      cli_errors.check_output_dir(args.data_dir)
    download_config = tfds.download.DownloadConfig(manual_dir=args.manual_dir)
    if args.beam_pipeline_options:
      beam = tfds.core.lazy_imports.apache_beam
      download_config.beam_options = beam.options.pipeline_options.PipelineOptions(
        flags=[f"--{opt}" for opt in args.beam_pipeline_options.split(",")]
      )
    # A build killed earlier left its incomplete.* folder: removed now (a live one is kept).
    tfds_util.remove_stale_incomplete(builder.data_dir)
    with tfds_util.sigterm_interrupts(f"the build of {builder.name}"):
      builder.download_and_prepare(download_config=download_config)
  print(
    f"prepared {builder.info.full_name} in {args.data_dir}: "
    + ", ".join(f"{k}={v.num_examples}" for k, v in builder.info.splits.items())
  )
  if args.manual_dir:  # a builder's own summary (occlusion: the training pool) reads the release
    for line in getattr(builder, "describe_prepared", lambda _: [])(args.manual_dir):
      print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
