"""The dataset registry: importing this module registers the project's four TFDS builders.

Each builder lives in its task's package (`relations.<task>.data.<dataset>`); importing them here
registers them with TFDS under their names, so the standard CLI finds every dataset without the
caller knowing which task owns it:

  tfds build --imports relations.datasets vidvrd --config fps2_short224 \
      --manual_dir ~/data/vidvrd --data_dir ~/tensorflow_datasets --file_format array_record

and `python -m relations.datasets.prepare --list` prints the names and builder configs.
"""

# pylint: disable=g-bad-import-order
from relations.commonsense.data.visualcomet import visualcomet_dataset_builder
from relations.occlusion.data.occlusion_boundaries import (
  occlusion_boundaries_dataset_builder,
)
from relations.video_relations.data.vidor import vidor_dataset_builder
from relations.video_relations.data.vidvrd import vidvrd_dataset_builder

# TFDS name -> builder class (the names TFDS registered on import).
BUILDERS = {
  "occlusion_boundaries": occlusion_boundaries_dataset_builder.Builder,
  "vidor": vidor_dataset_builder.Builder,
  "vidvrd": vidvrd_dataset_builder.Builder,
  "visualcomet": visualcomet_dataset_builder.Builder,
}
