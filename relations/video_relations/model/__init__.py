"""The relation tracker as it trains: the Flax modules and their losses, all jittable.

`relation_tracker` (ViT encoder + `detection_head` + `relation_head`), the set-prediction losses
(`losses`) and their on-device Hungarian matching (`matching`). Nothing here runs on the host
after training; `relations.video_relations.inference` turns the outputs into relations.
"""
