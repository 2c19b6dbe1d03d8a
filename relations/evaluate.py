"""`python -m relations.evaluate <what> ...`: score existing predictions with the official metrics.

  occlusion        B-/O-ODS/OIS/AP and AC; GT in the realoob layout or PIOD / BSDS-ownership .mat
                   (--gt-format; relations.occlusion.metrics.cli)
  depth            the RealOOB depth probes (relations.occlusion.metrics.depth_cli)
  video_relations  video relation detection mAP / R@K / P@K on VidOR or VidVRD
                   (relations.video_relations.metrics.cli; aliases: vidor, vidvrd)
  commonsense      VisualCOMET BLEU / METEOR / CIDEr / Unique / Novel (relations.commonsense.metrics.cli)

Run `python -m relations.evaluate <what> --help` for each one's arguments.
"""

import importlib
import sys

COMMANDS = {
    "occlusion": "relations.occlusion.metrics.cli",
    "depth": "relations.occlusion.metrics.depth_cli",
    "video_relations": "relations.video_relations.metrics.cli",
    "vidor": "relations.video_relations.metrics.cli",  # the verbs before the task was named
    "vidvrd": "relations.video_relations.metrics.cli",
    "commonsense": "relations.commonsense.metrics.cli",
}


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
    print(__doc__.strip(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
    if argv and argv[0] not in ("-h", "--help"):
      print(f"\nunknown evaluation {argv[0]!r}; choose one of {sorted(COMMANDS)}", file=sys.stderr)
      return 2
    return 0 if argv else 2
  module = importlib.import_module(COMMANDS[argv[0]])
  return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
  sys.exit(main())
