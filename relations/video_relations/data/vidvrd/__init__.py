"""ImageNet-VidVRD TFDS builder (registered as `vidvrd`); see vidvrd_dataset_builder."""

from relations.video_relations.data.vidvrd.vidvrd_dataset_builder import Builder  # noqa: F401  (importing registers the TFDS builder)
