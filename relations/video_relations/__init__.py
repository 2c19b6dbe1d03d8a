"""Video-level logic shared by the relation tracker.

Box algebra and Hungarian matching (`boxes`, `matching`), trajectory linking
and interpolation (`tracking`, `interpolate`), temporal segments (`segments`),
greedy relational association (`association`), submission writing
(`submission`), detection / tracking metrics (`metrics`) and GIF rendering
(`visualize`).
"""
