"""VidOR TFDS builder (registered as `vidor`); see vidor_dataset_builder."""

from relations.datasets.vidor.vidor_dataset_builder import Builder  # pylint: disable=unused-import
