"""TFDS `occlusion_boundaries` dataset (configs realoob, piod, bsds_ownership)."""

from relations.occlusion.data.occlusion_boundaries.occlusion_boundaries_dataset_builder import (
  Builder,  # noqa: F401  (importing registers the TFDS builder)
)
