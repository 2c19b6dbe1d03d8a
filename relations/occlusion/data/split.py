"""`python -m relations.occlusion.data.split`: a split stratified by source (RealOOB's 75/25).

  python -m relations.occlusion.data.split --root DIR [--test_fraction 0.25] [--seed 0]

Reads `DIR/sources.txt` ("<id> <source>" per line, `realoob_io.read_sources`)
and writes `DIR/splits/train.txt` and `DIR/splits/test.txt`: within each
source, round(n x test_fraction) ids (Python rounding) drawn with the seed
go to test, the rest to train.  RealOOB's sources (200 DIODE, 271
EntitySeg, 40 PIOD, 9 LF4D / iBims) give 50 + 68 + 10 + 2 = 130 test and 390
train images, its published 390 / 130.  Every listed id must have a
`boundaries/<id>.png`; hard negatives are not listed (they are training-only).
"""

import os
import sys

import numpy as np

from relations import cli_errors
from relations.occlusion.data import realoob_io


def stratified_split(sources, test_fraction=0.25, seed=0):
  """{id: source} -> (train ids, test ids), each sorted; per source round(n * f) to test."""
  if not 0 <= test_fraction <= 1:
    raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction}")
  train, test = [], []
  for k, src in enumerate(sorted(set(sources.values()))):
    ids = sorted(i for i, s in sources.items() if s == src)
    rng = np.random.default_rng([seed, k])
    order = rng.permutation(len(ids))
    n_test = round(len(ids) * test_fraction)
    test += [ids[j] for j in order[:n_test]]
    train += [ids[j] for j in order[n_test:]]
  return sorted(train), sorted(test)


@cli_errors.entry_point
def main(argv=None):
  p = cli_errors.ArgumentParser(
    prog="python -m relations.occlusion.data.split", description=__doc__.strip().splitlines()[0]
  )
  p.add_argument("--root", required=True, type=cli_errors.existing_dir, help="RealOOB-layout root")
  p.add_argument("--test_fraction", type=cli_errors.float_in(0, 1), default=0.25)
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  try:
    sources = realoob_io.read_sources(args.root)
    if sources is None:
      raise realoob_io.RealOOBFormatError(f"{os.path.join(args.root, realoob_io.SOURCES)}: missing")
    missing = [
      i
      for i in sources
      if not os.path.isfile(realoob_io.field_path(args.root, realoob_io.BOUNDARIES, i))
    ]
    if missing:
      raise realoob_io.RealOOBFormatError(
        f"{len(missing)} id(s) of sources.txt have no boundaries/<id>.png: {', '.join(missing[:5])}"
      )
  except realoob_io.RealOOBFormatError as e:
    raise cli_errors.InputError(str(e)) from None
  train, test = stratified_split(sources, args.test_fraction, args.seed)
  realoob_io.write_split(args.root, "train", train)
  realoob_io.write_split(args.root, "test", test)
  for src in sorted(set(sources.values())):
    n_te = sum(sources[i] == src for i in test)
    n = sum(s == src for s in sources.values())
    print(f"{src:<16} {n - n_te:>6} train {n_te:>6} test")
  print(f"{'total':<16} {len(train):>6} train {len(test):>6} test -> {args.root}/splits/")
  return 0


if __name__ == "__main__":
  sys.exit(main())
