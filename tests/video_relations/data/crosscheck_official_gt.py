"""Compares vrd_json.load_groundtruth with the official ground truth.

  python tests/video_relations/data/crosscheck_official_gt.py --helper /tmp/ref/VidVRD-helper \
      --data /tmp/vidor_syn [--dataset vidor|vidvrd] [--splits training validation]

`--helper` is a checkout of xdshang/VidVRD-helper (commit 1b4de17); its
`dataset.vidor.VidOR(...).get_relation_insts(vid)` (or `dataset.vidvrd.VidVRD`)
is run on the same folder and every video's instance list is compared for
exact equality (types included). Prints the counts; exits 1 on a mismatch.
"""

import argparse
import contextlib
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
  p = argparse.ArgumentParser()
  p.add_argument("--helper", required=True)
  p.add_argument("--data", required=True)
  p.add_argument("--dataset", default="vidor", choices=["vidor", "vidvrd"])
  p.add_argument("--splits", nargs="+", default=None)
  args = p.parse_args(argv)
  sys.path.insert(0, ROOT)
  sys.path.insert(0, args.helper)
  from relations.video_relations.data import annotations as vrd_json  # pylint: disable=g-import-not-at-top

  splits = args.splits or (
    ["training", "validation"] if args.dataset == "vidor" else ["train", "test"]
  )
  with contextlib.redirect_stdout(io.StringIO()):
    if args.dataset == "vidor":
      from dataset.vidor import VidOR  # pylint: disable=g-import-not-at-top

      official = VidOR(
        os.path.join(args.data, "annotation"),
        os.path.join(args.data, "video"),
        splits,
        low_memory=False,
      )
    else:
      from dataset.vidvrd import VidVRD  # pylint: disable=g-import-not-at-top

      official = VidVRD(args.data, os.path.join(args.data, "videos"), splits)
  videos = instances = mismatches = 0
  for split in splits:
    folder = (
      os.path.join(args.data, "annotation", split)
      if args.dataset == "vidor"
      else os.path.join(args.data, split)
    )
    ours = vrd_json.load_groundtruth(folder, dataset=args.dataset)
    assert sorted(ours) == sorted(official.get_index(split)), split
    for vid, insts in ours.items():
      ref = official.get_relation_insts(vid)
      videos += 1
      instances += len(ref)
      if insts != ref:
        mismatches += 1
        print("MISMATCH", split, vid)
  print(
    f"{args.dataset}: {videos} videos, {instances} relation instances, "
    f"{mismatches} videos differ from the official get_relation_insts"
  )
  return 1 if mismatches else 0


if __name__ == "__main__":
  sys.exit(main())
