"""Object categories and predicates of VidOR and ImageNet-VidVRD.

The lists are spelled exactly as in the official annotation files (see
the video-relations spec, section 2.4). Order is the order the public sources
give; nothing here depends on it, ids are only a convenience: key everything
by name (the official `Dataset` class derives ids from `sorted()` over the
loaded splits, so ids differ between code bases).
"""

from typing import Mapping

# VidOR: 80 object categories (BIG `utils/categories_v2.py`, VRDFormer
# `data/vidor/obj.txt`). The website CSV spells three of them "fruit",
# "vegetable", "backbag"; the annotation files use the spellings below.
VIDOR_OBJECT_CATEGORIES: tuple[str, ...] = (
  "bread",
  "cake",
  "dish",
  "fruits",
  "vegetables",
  "crab",
  "backpack",
  "camera",
  "cellphone",
  "handbag",
  "laptop",
  "suitcase",
  "ball/sports_ball",
  "bat",
  "frisbee",
  "racket",
  "skateboard",
  "ski",
  "snowboard",
  "surfboard",
  "toy",
  "baby_seat",
  "bottle",
  "chair",
  "cup",
  "electric_fan",
  "faucet",
  "microwave",
  "oven",
  "refrigerator",
  "screen/monitor",
  "sink",
  "sofa",
  "stool",
  "table",
  "toilet",
  "guitar",
  "piano",
  "baby_walker",
  "bench",
  "stop_sign",
  "traffic_light",
  "aircraft",
  "bicycle",
  "bus/truck",
  "car",
  "motorcycle",
  "scooter",
  "train",
  "watercraft",
  "bird",
  "chicken",
  "duck",
  "penguin",
  "fish",
  "stingray",
  "crocodile",
  "snake",
  "turtle",
  "antelope",
  "bear",
  "camel",
  "cat",
  "cattle/cow",
  "dog",
  "elephant",
  "hamster/rat",
  "horse",
  "kangaroo",
  "leopard",
  "lion",
  "panda",
  "pig",
  "rabbit",
  "sheep/goat",
  "squirrel",
  "tiger",
  "adult",
  "baby",
  "child",
)

# VidOR: 8 spatial predicates ("towards", not the website CSV's "toward").
VIDOR_SPATIAL_PREDICATES: tuple[str, ...] = (
  "above",
  "away",
  "behind",
  "beneath",
  "in_front_of",
  "inside",
  "next_to",
  "towards",
)

# VidOR: 42 action predicates (also asserted in VidVRD-helper dataset/vidor.py).
VIDOR_ACTION_PREDICATES: tuple[str, ...] = (
  "watch",
  "bite",
  "kiss",
  "lick",
  "smell",
  "caress",
  "knock",
  "pat",
  "point_to",
  "squeeze",
  "hold",
  "press",
  "touch",
  "hit",
  "kick",
  "lift",
  "throw",
  "wave",
  "carry",
  "grab",
  "release",
  "pull",
  "push",
  "hug",
  "lean_on",
  "ride",
  "chase",
  "get_on",
  "get_off",
  "hold_hand_of",
  "shake_hand_with",
  "wave_hand_to",
  "speak_to",
  "shout_at",
  "feed",
  "open",
  "close",
  "use",
  "cut",
  "clean",
  "drive",
  "play(instrument)",
)

VIDOR_PREDICATES: tuple[str, ...] = VIDOR_SPATIAL_PREDICATES + VIDOR_ACTION_PREDICATES

# ImageNet-VidVRD: 35 object categories (`docs/imagenet-vidvrd/object.txt`).
VIDVRD_OBJECT_CATEGORIES: tuple[str, ...] = (
  "turtle",
  "antelope",
  "bicycle",
  "lion",
  "ball",
  "motorcycle",
  "cattle",
  "airplane",
  "red_panda",
  "horse",
  "watercraft",
  "monkey",
  "fox",
  "elephant",
  "bird",
  "sheep",
  "frisbee",
  "giant_panda",
  "squirrel",
  "bus",
  "bear",
  "tiger",
  "train",
  "snake",
  "rabbit",
  "whale",
  "sofa",
  "skateboard",
  "dog",
  "domestic_cat",
  "person",
  "lizard",
  "hamster",
  "car",
  "zebra",
)

# ImageNet-VidVRD: 132 predicates (`docs/imagenet-vidvrd/predicate.txt`).
VIDVRD_PREDICATES: tuple[str, ...] = (
  "taller",
  "swim_behind",
  "walk_away",
  "fly_behind",
  "creep_behind",
  "lie_with",
  "move_left",
  "stand_next_to",
  "touch",
  "follow",
  "move_away",
  "lie_next_to",
  "walk_with",
  "move_next_to",
  "creep_above",
  "stand_above",
  "fall_off",
  "run_with",
  "swim_front",
  "walk_next_to",
  "kick",
  "stand_left",
  "creep_right",
  "sit_above",
  "watch",
  "swim_with",
  "fly_away",
  "creep_beneath",
  "front",
  "run_past",
  "jump_right",
  "fly_toward",
  "stop_beneath",
  "stand_inside",
  "creep_left",
  "run_next_to",
  "beneath",
  "stop_left",
  "right",
  "jump_front",
  "jump_beneath",
  "past",
  "jump_toward",
  "sit_front",
  "sit_inside",
  "walk_beneath",
  "run_away",
  "stop_right",
  "run_above",
  "walk_right",
  "away",
  "move_right",
  "fly_right",
  "behind",
  "sit_right",
  "above",
  "run_front",
  "run_toward",
  "jump_past",
  "stand_with",
  "sit_left",
  "jump_above",
  "move_with",
  "swim_beneath",
  "stand_behind",
  "larger",
  "walk_past",
  "stop_front",
  "run_right",
  "creep_away",
  "move_toward",
  "feed",
  "run_left",
  "lie_beneath",
  "fly_front",
  "walk_behind",
  "stand_beneath",
  "fly_above",
  "bite",
  "fly_next_to",
  "stop_next_to",
  "fight",
  "walk_above",
  "jump_behind",
  "fly_with",
  "sit_beneath",
  "sit_next_to",
  "jump_next_to",
  "run_behind",
  "move_behind",
  "swim_right",
  "swim_next_to",
  "hold",
  "move_past",
  "pull",
  "stand_front",
  "walk_left",
  "lie_above",
  "ride",
  "next_to",
  "move_beneath",
  "lie_behind",
  "toward",
  "jump_left",
  "stop_above",
  "creep_toward",
  "lie_left",
  "fly_left",
  "stop_with",
  "walk_toward",
  "stand_right",
  "chase",
  "creep_next_to",
  "fly_past",
  "move_front",
  "run_beneath",
  "creep_front",
  "creep_past",
  "play",
  "lie_inside",
  "stop_behind",
  "move_above",
  "sit_behind",
  "faster",
  "lie_right",
  "walk_front",
  "drive",
  "swim_left",
  "jump_away",
  "jump_with",
  "lie_front",
  "left",
)

_OBJECTS = {"vidor": VIDOR_OBJECT_CATEGORIES, "vidvrd": VIDVRD_OBJECT_CATEGORIES}
_PREDICATES = {"vidor": VIDOR_PREDICATES, "vidvrd": VIDVRD_PREDICATES}
DATASETS: tuple[str, ...] = ("vidor", "vidvrd")


def _check(dataset: str) -> None:
  if dataset not in _OBJECTS:
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")


def object_categories(dataset: str) -> tuple[str, ...]:
  """Object category names of `dataset` ("vidor" or "vidvrd")."""
  _check(dataset)
  return _OBJECTS[dataset]


def predicates(dataset: str) -> tuple[str, ...]:
  """Predicate names of `dataset` ("vidor" or "vidvrd")."""
  _check(dataset)
  return _PREDICATES[dataset]


def object_to_id(dataset: str) -> Mapping[str, int]:
  """Name -> index into `object_categories(dataset)`."""
  return {c: i for i, c in enumerate(object_categories(dataset))}


def predicate_to_id(dataset: str) -> Mapping[str, int]:
  """Name -> index into `predicates(dataset)`."""
  return {p: i for i, p in enumerate(predicates(dataset))}


def is_object_category(dataset: str, name: str) -> bool:
  """True if `name` is an object category of `dataset` (exact spelling)."""
  return name in object_to_id(dataset)


def is_predicate(dataset: str, name: str) -> bool:
  """True if `name` is a predicate of `dataset` (exact spelling)."""
  return name in predicate_to_id(dataset)


def is_spatial_predicate(name: str) -> bool:
  """True if `name` is one of VidOR's 8 spatial predicates."""
  return name in VIDOR_SPATIAL_PREDICATES


def dataset_of_video_id(video_id: str) -> str:
  """Guess the dataset from a video id: VidVRD ids start with "ILSVRC2015"."""
  return "vidvrd" if video_id.startswith("ILSVRC2015") else "vidor"


# Guard against editing mistakes: the published counts.
assert len(VIDOR_OBJECT_CATEGORIES) == len(set(VIDOR_OBJECT_CATEGORIES)) == 80
assert len(VIDOR_PREDICATES) == len(set(VIDOR_PREDICATES)) == 50
assert len(VIDVRD_OBJECT_CATEGORIES) == len(set(VIDVRD_OBJECT_CATEGORIES)) == 35
assert len(VIDVRD_PREDICATES) == len(set(VIDVRD_PREDICATES)) == 132
