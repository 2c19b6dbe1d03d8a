"""The dataset registry: where each TFDS builder of the project lives.

Each builder lives in its task's package (`relations.<task>.data.<dataset>`); this module only names
them, so `python -m relations.datasets.prepare` and `tfds build --imports ...` find every dataset
without the caller knowing which task owns it.
"""

BUILDERS = {
    "occlusion_boundaries":
        "relations.occlusion.data.occlusion_boundaries.occlusion_boundaries_dataset_builder",
    "vidor": "relations.video_relations.data.vidor.vidor_dataset_builder",
    "vidvrd": "relations.video_relations.data.vidvrd.vidvrd_dataset_builder",
    "visualcomet": "relations.commonsense.data.visualcomet.visualcomet_dataset_builder",
}
