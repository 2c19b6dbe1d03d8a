"""ImageNet-VidVRD TFDS builder (registered as `vidvrd`); see vidvrd_dataset_builder."""
