"""VidOR TFDS builder (registered as `vidor`); see vidor_dataset_builder."""

from relations.video_relations.data.vidor.vidor_dataset_builder import Builder  # noqa: F401  (importing registers the TFDS builder)
