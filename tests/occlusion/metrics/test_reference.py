"""Aggregated B-/O- metrics vs the same aggregation on pyEdgeEval's matcher.

32 fixture pairs; 33 thresholds (DOC's setting) keep the stochastic BSDS
matcher's cost within the CI budget; bench/occlusion_eval.py runs 99.
"""

import numpy as np
import pytest

from relations.occlusion.metrics import api
from relations.occlusion.metrics import image_eval
from tests.occlusion.metrics import reference
from tests.occlusion.metrics import fixtures


@pytest.mark.slow  # ~40 s: 32 pairs x 33 thresholds of the stochastic BSDS matcher
def test_metrics_agree_with_bsds_matcher():
  pairs = fixtures.pairs()
  ours, ref = [], []
  for s in pairs:
    args = (s["prob"], s["gts"], s["theta_pred"], s["theta_gts"], s["valids"])
    ours.append(image_eval.evaluate_image(*args, nthresh=33, border=2))
    ref.append(reference.reference_counts(*args, nthresh=33, border=2))
    # The exact matching never finds fewer pairs than the BSDS matcher.
    assert np.all(ours[-1]["cnt_r"] >= ref[-1]["cnt_r"])
    np.testing.assert_array_equal(ours[-1]["sum_p"], ref[-1]["sum_p"])
  for valid_only in (False, True):
    a = api.summarize_counts(ours, valid_only)
    b = api.summarize_counts(ref, valid_only)
    for k in ("B-ODS", "B-OIS", "B-AP"):
      assert abs(a[k] - b[k]) <= 3e-3, (k, a[k], b[k])
    for k in ("O-ODS", "O-OIS", "O-AP"):
      assert abs(a[k] - b[k]) <= 5e-3, (k, a[k], b[k])
    # DOC's `_o` curve and its validity-aware twin.  (The orientation-
    # accuracy curve `_aoc` divides by matched pixels only, so its per-image
    # OIS argmax moves with the reference's random shortfall; it is plotted,
    # not scored.)
    for name in ("o", "valid_orr"):
      for m in ("ODS", "AP"):
        assert abs(a["curves"][name][m] - b["curves"][name][m]) <= 5e-3
