"""From model outputs to the official submission, on the host (NumPy, SciPy, Pillow).

`pipeline.Predictor` runs the model over whole videos; detections are linked into tracks
(`tracking`, `interpolate`), relations predicted per temporal segment (`segments`) and chained
(`association`), cut and written (`submission`), drawn (`visualize`); `prior_baseline` is the
pixel-free baseline every model must beat. No module here imports the model or the trainer.
"""
