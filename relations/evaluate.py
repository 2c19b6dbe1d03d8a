"""`python -m relations.evaluate <what> ...`: score existing predictions with the official metrics.

  occlusion    B-/O-ODS/OIS/AP and AC; GT in the realoob layout or PIOD / BSDS-ownership .mat
               (--gt-format; relations.evaluators.occlusion_cli)
  depth        the RealOOB depth probes (relations.evaluators.depth_cli)
  vidor        video relation detection mAP / R@K / P@K (relations.evaluators.vidor_cli); also VidVRD
  commonsense  VisualCOMET BLEU / METEOR / CIDEr / Unique / Novel (relations.evaluators.commonsense_cli)

Run `python -m relations.evaluate <what> --help` for each one's arguments.
"""

import importlib
import sys

COMMANDS = {
    "occlusion": "relations.evaluators.occlusion_cli",
    "depth": "relations.evaluators.depth_cli",
    "vidor": "relations.evaluators.vidor_cli",
    "vidvrd": "relations.evaluators.vidor_cli",
    "commonsense": "relations.evaluators.commonsense_cli",
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
