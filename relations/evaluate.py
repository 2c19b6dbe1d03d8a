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

from relations import cli_errors

COMMANDS = {
  "occlusion": "relations.occlusion.metrics.cli",
  "depth": "relations.occlusion.metrics.depth_cli",
  "video_relations": "relations.video_relations.metrics.cli",
  "vidor": "relations.video_relations.metrics.cli",  # the verbs before the task was named
  "vidvrd": "relations.video_relations.metrics.cli",
  "commonsense": "relations.commonsense.metrics.cli",
}


@cli_errors.entry_point
def main(argv=None) -> int:
  argv = list(argv)
  if argv and argv[0] in ("-h", "--help"):
    print(__doc__.strip())
    return 0
  if not argv:
    print(__doc__.strip(), file=sys.stderr)
    raise cli_errors.InputError(f"say what to evaluate: one of {', '.join(COMMANDS)}")
  if argv[0] not in COMMANDS:
    raise cli_errors.InputError(
      f"unknown evaluation {argv[0]!r}; choose one of "
      f"{', '.join(COMMANDS)} (python -m relations.evaluate --help)"
    )
  module = importlib.import_module(COMMANDS[argv[0]])
  return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
  sys.exit(main())
