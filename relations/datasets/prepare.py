"""Build a dataset from its official release files: TFDS `download_and_prepare` with a manual dir.

  python -m relations.datasets.prepare vidor/fps2_short224 --manual_dir ~/vidor --data_dir ~/tfds
  python -m relations.datasets.prepare occlusion_boundaries/realoob --manual_dir ~/RealOOB \
      --data_dir gs://bucket/tensorflow_datasets

The `tfds build` CLI needs apache-beam, which this project does not install; this does the same
for our builders, offline. `--list` prints the datasets and their builder configs.
"""

from __future__ import annotations

import importlib
import sys

from relations import cli_errors
from relations.datasets import BUILDERS

DATASETS = tuple(BUILDERS)


def builder_class(name: str):
  if name not in DATASETS:
    raise cli_errors.InputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)} "
                                "(--list shows their configs)")
  module = importlib.import_module(BUILDERS[name])
  return module.Builder


@cli_errors.entry_point
def main(argv=None) -> int:
  p = cli_errors.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                prog="python -m relations.datasets.prepare")
  p.add_argument("dataset", nargs="?", help="NAME or NAME/CONFIG")
  p.add_argument("--manual_dir", type=cli_errors.existing_dir,
                 help="directory with the official release files")
  p.add_argument("--data_dir", help="TFDS data directory to write to")
  p.add_argument("--file_format", default="array_record", choices=["array_record", "tfrecord",
                                                                   "parquet"])
  p.add_argument("--list", action="store_true", help="list datasets and builder configs")
  args = p.parse_args(argv)
  if args.list or not args.dataset:
    for name in DATASETS:
      cls = builder_class(name)
      configs = [c.name for c in (cls.BUILDER_CONFIGS or [])]
      print(f"{name}: {', '.join(configs) if configs else '(no configs)'}")
    return 0 if args.list else 2
  if not args.manual_dir or not args.data_dir:
    p.error("--manual_dir and --data_dir are required")
  name, _, config = args.dataset.partition("/")
  cls = builder_class(name)
  known = [c.name for c in (cls.BUILDER_CONFIGS or [])]
  if config and config not in known:
    raise cli_errors.InputError(f"unknown config {config!r} of dataset {name!r}; choose one of "
                                f"{', '.join(known) or '(none: give the bare name)'}")
  if "://" not in args.data_dir:
    cli_errors.check_output_dir(args.data_dir)
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = cls(config=config or None, data_dir=args.data_dir,
                                file_format=args.file_format)
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(manual_dir=args.manual_dir))
  print(f"prepared {builder.info.full_name} in {args.data_dir}: "
        + ", ".join(f"{k}={v.num_examples}" for k, v in builder.info.splits.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
