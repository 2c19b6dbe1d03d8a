"""Reads the TensorBoard event files of a workdir back (tests only): tag -> [(step, value)].

Uses tensorboard's own event reader, so a test sees what TensorBoard would show. Values:
scalars as float, images as the list of encoded PNG byte strings of the event, texts as str,
histograms as the raw `TensorProto` (its plugin name tells the kind, `kinds(...)`).
"""

from __future__ import annotations

import glob
import os

import numpy as np
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util


def _files(workdir: str) -> list[str]:
  files = sorted(glob.glob(os.path.join(workdir, "**", "events.out.tfevents.*"), recursive=True))
  if not files:
    raise FileNotFoundError(f"{workdir}: no TensorBoard event files")
  return files


def read(workdir: str) -> dict[str, list[tuple[int, object]]]:
  """{tag: [(step, value), ...]} over every event file under `workdir`, in file order."""
  out: dict[str, list[tuple[int, object]]] = {}
  for path in _files(workdir):
    for event in event_file_loader.EventFileLoader(path).Load():
      for v in event.summary.value:
        plugin = v.metadata.plugin_data.plugin_name
        arr = tensor_util.make_ndarray(v.tensor) if v.HasField("tensor") else None
        if plugin == "scalars" or (arr is not None and arr.ndim == 0 and arr.dtype.kind == "f"):
          value = float(arr)
        elif plugin == "images":
          value = [bytes(b) for b in np.asarray(arr).reshape(-1)[2:]]  # [width, height, png...]
        elif plugin == "text":
          value = np.asarray(arr).reshape(-1)[0].decode()
        else:
          value = v.tensor
        out.setdefault(v.tag, []).append((int(event.step), value))
  return out


def kinds(workdir: str) -> dict[str, str]:
  """{tag: plugin name} ("scalars", "images", "text", "histograms", ...)."""
  out = {}
  for path in _files(workdir):
    for event in event_file_loader.EventFileLoader(path).Load():
      for v in event.summary.value:
        out[v.tag] = v.metadata.plugin_data.plugin_name
  return out
