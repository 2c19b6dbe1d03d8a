"""PR-curve plots (boundary PR, orientation PR, orientation accuracy)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

from relations import io_util


def _iso_f(ax):
  for f in np.arange(0.1, 1.0, 0.1):
    r = np.linspace(f / (2 - f) + 1e-6, 1, 200)
    p = f * r / (2 * r - f)
    ax.plot(r, p, color="0.85", lw=0.7, zorder=0)


def plot_pr_curves(summary, path, title=""):
  """Draws boundary PR, orientation PR and orientation-accuracy curves.

  Args:
    summary: an `api.summarize_counts` dict (uses summary["curves"]).
    path: output PNG path (written to a temporary name, then renamed).
    title: figure title prefix.
  """
  curves = summary["curves"]
  o_name = summary.get("o_curve", "poc")
  if o_name is None:  # boundary only: one panel
    fig, ax = plt.subplots(1, 1, figsize=(5, 5))
    axes = [ax]
    panels = (("boundary", "Boundary PR (B)"),)
  else:
    fig, axes = plt.subplots(1, 3, figsize=(15, 5))
    panels = (("boundary", "Boundary PR (B)"), (o_name, f"Orientation PR (O, {o_name})"))
  for ax, (name, label) in zip(axes[:2], panels):
    c = curves[name]
    _iso_f(ax)
    ax.plot(c["R"], c["P"], lw=2, label=f"ODS={c['ODS']:.3f} OIS={c['OIS']:.3f} AP={c['AP']:.3f}")
    ax.plot([c["ODS_R"]], [c["ODS_P"]], "o", color="C3")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Recall", ylabel="Precision", title=label)
    ax.legend(loc="lower left")
    ax.grid(alpha=0.3)
  if o_name is None:
    _save(fig, path, title)
    return
  c = curves["aoc"]
  axes[2].plot(c["R"], c["P"], lw=2, color="C2")
  axes[2].set(
    xlim=(0, 1),
    ylim=(0, 1),
    xlabel="Boundary recall",
    ylabel="Orientation accuracy of matched predictions",
    title="Orientation accuracy (AOR)",
  )
  axes[2].grid(alpha=0.3)
  _save(fig, path, title)


def _save(fig, path, title):
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  try:
    with io_util.atomic_path(path) as tmp:
      fig.savefig(tmp, dpi=80, format="png")
  finally:
    plt.close(fig)
