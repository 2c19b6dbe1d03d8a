"""Video visual relation detection (VidOR / VidVRD).

- `model/`: the Flax relation tracker and what it needs at train time (heads, losses, matching);
- `inference/`: what turns model outputs into tracks, relation instances and the submission;
- `metrics/`: the model-free official scorers and validator;
- `data/`: dataset builders, synthetic data and video decoding;
- `boxes`: box algebra shared by the model (JAX), inference and metrics (NumPy twins);
- `task`, `evaluator`, `demo`: the glue to the trainer, its evaluator and the README demo.
"""
