"""ImageNet-VidVRD TFDS builder (registered as `vidvrd`); see vidvrd_dataset_builder."""

from relations.datasets.vidvrd.vidvrd_dataset_builder import Builder  # pylint: disable=unused-import
