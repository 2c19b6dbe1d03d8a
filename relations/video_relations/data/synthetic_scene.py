"""Scene model of the synthetic VidOR videos: appearance, scripts, rendering.

Each object category has its own shape, colour and texture (`APPEARANCE`), so
a small ViT can tell them apart. A video is a set of `Track`s (per-frame
centre, size, tilt, depth) produced by scripted behaviours (`SCRIPTS`), plus
per-frame action flags the scripts set (who holds, rides, leans on or chases
whom). `render` draws the frames far-to-near (real occlusion) and returns
per-object visible fractions. Units: pixels and native frames.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

# category -> (shape, RGB colour, texture, (w, h) at a 128x96 canvas).
APPEARANCE: dict[str, tuple[str, tuple[int, int, int], str, tuple[float, float]]] = {
  "adult": ("rect", (40, 80, 230), "hstripes", (13, 32)),
  "child": ("ellipse", (255, 140, 20), "solid", (11, 22)),
  "dog": ("ellipse", (140, 85, 35), "dots", (22, 13)),
  "cat": ("triangle", (160, 160, 160), "vstripes", (15, 15)),
  "horse": ("hexagon", (215, 180, 115), "checker", (30, 20)),
  "bicycle": ("ring", (230, 40, 200), "solid", (24, 18)),
  "car": ("rect", (30, 170, 60), "checker", (40, 20)),
  "ball/sports_ball": ("ellipse", (230, 30, 30), "solid", (9, 9)),
  "cup": ("rect", (245, 245, 245), "vstripes", (8, 10)),
  "toy": ("star", (250, 230, 30), "solid", (12, 12)),
  "table": ("table", (30, 200, 200), "hstripes", (34, 18)),
  "sofa": ("ushape", (130, 50, 170), "dots", (36, 18)),
  "bird": ("vtriangle", (120, 200, 255), "checker", (12, 9)),
}
PERSONS = ("adult", "child")
MOVERS = ("adult", "child", "dog", "cat")
CHASE_TARGETS = ("cat", "dog", "child", "ball/sports_ball")
RIDEABLE = ("bicycle", "horse")
HOLDABLE = ("cup", "ball/sports_ball", "toy")
LEANABLE = ("table", "sofa", "car")
CONTAINERS = ("car", "sofa")
INSIDE_ITEMS = ("cat", "toy", "cup")
STATIC = ("table", "sofa", "car", "bicycle", "toy", "ball/sports_ball")
OCCLUDERS = ("adult", "child", "dog", "car", "horse")
FLYERS = ("bird",)


@dataclasses.dataclass
class Track:
  """One object over F frames. Arrays are [F] float64 unless noted."""

  category: str
  cx: np.ndarray
  cy: np.ndarray
  w: float
  h: float
  depth: float  # smaller is nearer the camera (drawn later)
  angle: np.ndarray  # tilt in degrees, positive leans right


@dataclasses.dataclass
class Scene:
  """Tracks plus the action flags scripts set: (pred, s, o) -> [F] bool."""

  width: int
  height: int
  num_frames: int
  tracks: list[Track] = dataclasses.field(default_factory=list)
  actions: dict[tuple[str, int, int], np.ndarray] = dataclasses.field(default_factory=dict)

  @property
  def scale(self) -> float:
    return min(self.width / 128, self.height / 96)

  def add(self, rng: np.random.Generator, category: str, cx, cy, depth: float, angle=0.0) -> int:
    _, _, _, (w, h) = APPEARANCE[category]
    jitter = rng.uniform(0.9, 1.1)
    f = self.num_frames
    self.tracks.append(
      Track(
        category,
        np.broadcast_to(np.asarray(cx, float), (f,)).copy(),
        np.broadcast_to(np.asarray(cy, float), (f,)).copy(),
        w * self.scale * jitter,
        h * self.scale * jitter,
        depth,
        np.broadcast_to(np.asarray(angle, float), (f,)).copy(),
      )
    )
    return len(self.tracks) - 1

  def flag(self, pred: str, s: int, o: int, mask: np.ndarray) -> None:
    key = (pred, s, o)
    self.actions[key] = self.actions.get(key, np.zeros(self.num_frames, bool)) | mask


def path(num_frames: int, keys: list[tuple[float, float]]) -> np.ndarray:
  """[F] piecewise-linear values through (frame, value) keyframes."""
  t, v = zip(*keys)
  return np.interp(np.arange(num_frames), t, v)


def _ground(scene: Scene, rng, h: float) -> float:
  """Centre y of an object of height h standing on the ground band."""
  ground = scene.height * rng.uniform(0.72, 0.9)
  return ground - h / 2


def _side(rng) -> int:
  return 1 if rng.random() < 0.5 else -1


def _cross(scene: Scene, rng, t0: int, t1: int, w: float):
  """x keyframes of a walk across the frame (enters and leaves)."""
  s = _side(rng)
  a, b = -w * 0.6, scene.width + w * 0.6
  if s < 0:
    a, b = b, a
  return [(t0, a), (t1, b)]


# Scripts: script(scene, rng, t0, t1) adds 2 objects acting in [t0, t1).


def script_chase(scene: Scene, rng, t0: int, t1: int) -> None:
  chaser = rng.choice(MOVERS)
  target = rng.choice([c for c in CHASE_TARGETS if c != chaser])
  d = 3.0 + rng.uniform(0, 1)
  o = scene.add(rng, target, 0.0, 0.0, depth=d)
  s = scene.add(rng, chaser, 0.0, 0.0, depth=d + 0.5)
  ts, to = scene.tracks[s], scene.tracks[o]
  f = scene.num_frames
  xs = path(f, _cross(scene, rng, t0, t1, to.w))
  to.cx[:] = xs
  to.cy[:] = _ground(scene, rng, to.h)
  # The chaser waits at the entry side, starts when the target has passed
  # it, then follows the target's trail with a lag.
  lag = int(rng.integers(6, 12))
  start = t0 + int(rng.integers(lag, max(lag + 1, (t1 - t0) // 3)))
  src = np.clip(np.arange(f) - lag, 0, f - 1)
  direction = np.sign(xs[-1] - xs[0])
  gap = direction * (ts.w + to.w) * 0.55
  trail = xs[src] - gap
  wait_x = trail[start]
  ts.cx[:] = np.where(np.arange(f) < start, wait_x, trail)
  ts.cy[:] = _ground(scene, rng, ts.h)
  running = (np.arange(f) >= start) & (np.arange(f) < t1)
  scene.flag("chase", s, o, running)


def script_approach(scene: Scene, rng, t0: int, t1: int) -> None:
  """A mover walks to a static object, stays next to it, walks away."""
  mover = rng.choice(MOVERS)
  static = rng.choice([c for c in STATIC if c != mover])
  o = scene.add(rng, static, scene.width * rng.uniform(0.35, 0.65), 0.0, depth=4.0)
  to = scene.tracks[o]
  to.cy[:] = _ground(scene, rng, to.h)
  s = scene.add(rng, mover, 0.0, 0.0, depth=3.5)
  ts = scene.tracks[s]
  side = _side(rng)
  near = to.cx[0] + side * (to.w + ts.w) * 0.62
  far = to.cx[0] + side * scene.width * 0.75
  span = t1 - t0
  a, b = t0 + span * 0.35, t0 + span * 0.65
  ts.cx[:] = path(scene.num_frames, [(t0, far), (a, near), (b, near), (t1, far)])
  ts.cy[:] = to.cy[0] + (to.h - ts.h) / 2


def script_lean(scene: Scene, rng, t0: int, t1: int) -> None:
  """A person walks to a table/sofa/car, leans on it (tilted), leaves."""
  person = rng.choice(PERSONS)
  support = rng.choice(LEANABLE)
  o = scene.add(rng, support, scene.width * rng.uniform(0.35, 0.65), 0.0, depth=4.0)
  to = scene.tracks[o]
  to.cy[:] = _ground(scene, rng, to.h)
  s = scene.add(rng, person, 0.0, 0.0, depth=3.0)
  ts = scene.tracks[s]
  side = _side(rng)
  touch = to.cx[0] + side * (to.w / 2 + ts.w * 0.25)
  far = to.cx[0] + side * scene.width * 0.8
  span = t1 - t0
  a, b = int(t0 + span * 0.3), int(t0 + span * 0.75)
  f = scene.num_frames
  ts.cx[:] = path(f, [(t0, far), (a, touch), (b, touch), (t1, far)])
  ts.cy[:] = to.cy[0] + (to.h - ts.h) / 2
  leaning = (np.arange(f) >= a + 2) & (np.arange(f) < b - 2)
  # Lean towards the support: the top of the person tips over it.
  ts.angle[:] = np.where(leaning, -side * 18.0, 0.0)
  scene.flag("lean_on", s, o, leaning)


def script_hold(scene: Scene, rng, t0: int, t1: int) -> None:
  """A person walks to a small object, picks it up and carries it off."""
  person = rng.choice(PERSONS)
  item = rng.choice(HOLDABLE)
  o = scene.add(rng, item, scene.width * rng.uniform(0.3, 0.7), 0.0, depth=2.0)
  to = scene.tracks[o]
  s = scene.add(rng, person, 0.0, 0.0, depth=3.0)
  ts = scene.tracks[s]
  ground = _ground(scene, rng, ts.h)
  to.cy[:] = ground + (ts.h - to.h) / 2
  side = _side(rng)
  f = scene.num_frames
  span = t1 - t0
  pick = int(t0 + span * rng.uniform(0.3, 0.5))
  hand = side * (ts.w / 2 + to.w * 0.3)  # the item hangs at the hand
  far_in = to.cx[0] - side * scene.width * 0.7
  far_out = to.cx[0] + side * scene.width * 0.9
  ts.cx[:] = path(f, [(t0, far_in), (pick, to.cx[0] - hand), (t1, far_out)])
  ts.cy[:] = ground
  held = np.arange(f) >= pick
  to.cx[:] = np.where(held, ts.cx + hand, to.cx)
  to.cy[:] = np.where(held, ground + ts.h * 0.05, to.cy)
  scene.flag("hold", s, o, held & (np.arange(f) < t1))


def script_ride(scene: Scene, rng, t0: int, t1: int) -> None:
  """A person rides a bicycle/horse across; half the time gets on first."""
  rider = rng.choice(PERSONS)
  mount = rng.choice(RIDEABLE)
  o = scene.add(rng, mount, 0.0, 0.0, depth=3.0)
  s = scene.add(rng, rider, 0.0, 0.0, depth=2.5)
  to, ts = scene.tracks[o], scene.tracks[s]
  f = scene.num_frames
  t = np.arange(f)
  to.cy[:] = _ground(scene, rng, to.h)
  seat = to.cy[0] - to.h * 0.2 - ts.h / 2 + to.h * 0.1
  if rng.random() < 0.5:
    # Gets on a parked mount mid-video, then rides off.
    park = scene.width * rng.uniform(0.3, 0.7)
    side = _side(rng)
    on = int(t0 + (t1 - t0) * rng.uniform(0.3, 0.45))
    to.cx[:] = path(f, [(on, park), (t1, park + side * scene.width)])
    ts.cx[:] = path(
      f,
      [
        (t0, park - side * scene.width * 0.6),
        (on - 4, park - side * (to.w / 2 + ts.w / 2)),
        (on, park),
        (t1, park + side * scene.width),
      ],
    )
    ground_y = to.cy[0] + (to.h - ts.h) / 2
    ts.cy[:] = np.where(t < on - 4, ground_y, np.interp(t, [on - 4, on], [ground_y, seat]))
    riding = t >= on
  else:
    xs = path(f, _cross(scene, rng, t0, t1, to.w))
    to.cx[:] = xs
    ts.cx[:] = xs
    ts.cy[:] = seat
    riding = np.ones(f, bool)
  scene.flag("ride", s, o, riding & (t >= t0) & (t < t1))


def script_fly_over(scene: Scene, rng, t0: int, t1: int) -> None:
  """A bird flies over a ground object (above / beneath)."""
  ground_obj = rng.choice(["dog", "car", "adult", "table", "horse", "sofa"])
  o = scene.add(rng, ground_obj, scene.width * rng.uniform(0.3, 0.7), 0.0, depth=4.0)
  to = scene.tracks[o]
  to.cy[:] = _ground(scene, rng, to.h)
  s = scene.add(rng, rng.choice(FLYERS), 0.0, 0.0, depth=1.0)
  ts = scene.tracks[s]
  f = scene.num_frames
  ts.cx[:] = path(f, _cross(scene, rng, t0, t1, ts.w))
  top = to.cy[0] - to.h / 2
  ts.cy[:] = max(ts.h / 2 + 1, top - ts.h / 2 - rng.uniform(2, 10) * scene.scale) + 1.5 * np.sin(
    np.arange(f) * 0.3
  )


def script_occlude(scene: Scene, rng, t0: int, t1: int) -> None:
  """One object passes in front of (or behind) another one."""
  a, b = rng.choice(OCCLUDERS, size=2, replace=False)
  o = scene.add(rng, b, scene.width * rng.uniform(0.35, 0.65), 0.0, depth=4.0)
  to = scene.tracks[o]
  to.cy[:] = _ground(scene, rng, to.h)
  front = rng.random() < 0.5
  s = scene.add(rng, a, 0.0, 0.0, depth=2.0 if front else 6.0)
  ts = scene.tracks[s]
  ts.cx[:] = path(scene.num_frames, _cross(scene, rng, t0, t1, ts.w))
  ts.cy[:] = to.cy[0] + (to.h - ts.h) / 2 + rng.uniform(-2, 2)


def script_inside(scene: Scene, rng, t0: int, t1: int) -> None:
  """A small object sits inside a car/sofa that crosses the frame."""
  box = rng.choice(CONTAINERS)
  item = rng.choice(INSIDE_ITEMS)
  o = scene.add(rng, box, 0.0, 0.0, depth=4.0)
  to = scene.tracks[o]
  s = scene.add(rng, item, 0.0, 0.0, depth=3.8)
  ts = scene.tracks[s]
  ts.w, ts.h = min(ts.w, to.w * 0.45), min(ts.h, to.h * 0.6)
  f = scene.num_frames
  if box == "car":
    to.cx[:] = path(f, _cross(scene, rng, t0, t1, to.w))
  else:
    to.cx[:] = scene.width * rng.uniform(0.3, 0.7)
  to.cy[:] = _ground(scene, rng, to.h)
  ts.cx[:] = to.cx + rng.uniform(-0.2, 0.2) * to.w
  ts.cy[:] = to.cy + to.h * 0.1


SCRIPTS: dict[str, Callable[[Scene, np.random.Generator, int, int], None]] = {
  "chase": script_chase,
  "approach": script_approach,
  "lean": script_lean,
  "hold": script_hold,
  "ride": script_ride,
  "fly_over": script_fly_over,
  "occlude": script_occlude,
  "inside": script_inside,
}


def _shape_mask(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
  """Inside test in object coordinates u, v in [-1, 1] (v points down)."""
  au, av = np.abs(u), np.abs(v)
  box = (au <= 1) & (av <= 1)
  if shape == "rect":
    return box
  if shape == "ellipse":
    return u * u + v * v <= 1
  if shape == "triangle":
    return box & (au <= (v + 1) / 2)
  if shape == "vtriangle":
    return box & (au <= (1 - v) / 2)
  if shape == "hexagon":
    return box & (au <= 1 - av * 0.5)
  if shape == "ring":
    r = u * u + v * v
    return (r <= 1) & (r >= 0.4)
  if shape == "star":
    r = np.sqrt(u * u + v * v)
    return r <= 0.55 + 0.45 * np.cos(5 * np.arctan2(v, u))
  if shape == "table":
    return box & ((v <= -0.4) | ((au >= 0.65) & (au <= 0.9)))
  if shape == "ushape":
    return box & ~((au < 0.6) & (v < 0.2))
  raise ValueError(f"unknown shape {shape!r}")


def _texture(texture: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
  """Brightness factor in (0, 1] in object coordinates."""
  if texture == "solid":
    return np.ones_like(u)
  if texture == "hstripes":
    return np.where(np.floor((v + 1) * 3) % 2 == 0, 1.0, 0.5)
  if texture == "vstripes":
    return np.where(np.floor((u + 1) * 3) % 2 == 0, 1.0, 0.5)
  if texture == "checker":
    return np.where((np.floor((u + 1) * 2.5) + np.floor((v + 1) * 2.5)) % 2 == 0, 1.0, 0.45)
  if texture == "dots":
    fu, fv = (u + 1) * 2 % 1 - 0.5, (v + 1) * 2 % 1 - 0.5
    return np.where(fu * fu + fv * fv < 0.06, 0.3, 1.0)
  raise ValueError(f"unknown texture {texture!r}")


def background(rng, width: int, height: int) -> np.ndarray:
  """[H, W, 3] float32 muted sky/ground gradient with static noise."""
  sky = rng.uniform(150, 200, 3)
  ground = rng.uniform(70, 120, 3) * np.array([0.9, 1.0, 0.8])
  horizon = height * rng.uniform(0.45, 0.6)
  y = np.arange(height)[:, None, None]
  t = np.clip((y - horizon) / 6 + 0.5, 0, 1)
  img = (1 - t) * sky + t * ground
  img = np.broadcast_to(img, (height, width, 3)).astype(np.float32)
  return img + rng.normal(0, 4, (height, width, 3)).astype(np.float32)


def render(scene: Scene, bg: np.ndarray, frame: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Draws one frame far-to-near.

  Args:
    scene: the tracks.
    bg: [H, W, 3] float32 background.
    frame: frame index.

  Returns:
    image: [H, W, 3] uint8.
    boxes: [K, 4] int64 inclusive (x1, y1, x2, y2) of each object's drawn
      shape inside the frame (occluded pixels included); -1 if none.
    visible: [K] float fraction of those pixels not covered by nearer
      objects; NaN for an object with no pixel in the frame.
  """
  img = bg.copy()
  owner = np.full(bg.shape[:2], -1, np.int32)
  area = np.zeros(len(scene.tracks))
  boxes = np.full((len(scene.tracks), 4), -1, np.int64)
  order = sorted(range(len(scene.tracks)), key=lambda i: -scene.tracks[i].depth)
  height, width = bg.shape[:2]
  for i in order:
    tr = scene.tracks[i]
    shape, colour, texture, _ = APPEARANCE[tr.category]
    cx, cy, a = tr.cx[frame], tr.cy[frame], np.deg2rad(tr.angle[frame])
    # Rotate about the bottom centre so a lean keeps the feet in place; the
    # shape lies within radius r of that pivot, so only that window is drawn.
    px, py = cx, cy + tr.h / 2
    r = np.hypot(tr.w / 2, tr.h) + 1
    x0, x1 = max(0, int(px - r)), min(width, int(px + r) + 1)
    y0, y1 = max(0, int(py - r)), min(height, int(py + r) + 1)
    if x0 >= x1 or y0 >= y1:
      continue
    ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float64) + 0.5
    dx, dy = xs - px, ys - py
    lx = dx * np.cos(a) + dy * np.sin(a)
    ly = -dx * np.sin(a) + dy * np.cos(a)
    u, v = lx / (tr.w / 2), (ly + tr.h / 2) / (tr.h / 2)
    mask = _shape_mask(shape, u, v)
    if not mask.any():
      continue
    area[i] = mask.sum()
    rows, cols = np.nonzero(mask.any(1))[0], np.nonzero(mask.any(0))[0]
    boxes[i] = (x0 + cols[0], y0 + rows[0], x0 + cols[-1], y0 + rows[-1])
    shade = _texture(texture, u, v)[mask][:, None]
    img[y0:y1, x0:x1][mask] = np.asarray(colour, np.float32) * shade
    owner[y0:y1, x0:x1][mask] = i
  counts = np.bincount(owner[owner >= 0], minlength=len(scene.tracks))
  with np.errstate(invalid="ignore", divide="ignore"):
    visible = np.where(area > 0, counts / np.maximum(area, 1), np.nan)
  return np.clip(img, 0, 255).astype(np.uint8), boxes, visible
