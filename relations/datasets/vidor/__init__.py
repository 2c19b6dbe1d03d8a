"""VidOR TFDS builder (registered as `vidor`); see vidor_dataset_builder."""
