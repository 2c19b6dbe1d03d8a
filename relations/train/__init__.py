"""The shared trainer package; run it with `python -m relations.train --config ... --workdir ...`."""
