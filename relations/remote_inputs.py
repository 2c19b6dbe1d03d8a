"""Local copies of inputs that are named by URL (`gs://bucket/...`).

Readers that only take local paths (numpy's `np.load`, safetensors, the tokenizer's vocabulary
files, the video ground truth's folder walk, json loaders built on `open`) get a path from
`local_copy`: the path itself when it is local, else a copy of the object (or of the whole
"directory" below the URL) in a cache folder on this machine. On a TPU pod every worker reads its
inputs from the bucket this way, instead of a `gs:` folder that `open` would look for in the
current directory.

The copy is atomic: it is made in a temporary folder beside its final place and renamed onto it,
so a reader (another process on the same host, or a run restarted after a kill) sees either the
complete copy or none. A copy is reused only while the object's size and modification time are
those it was copied with; a changed object is copied again.

Cache folder: `$RELATIONS_CACHE_DIR/remote_inputs` (default `~/.cache/relations/remote_inputs`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile

from relations import io_util

_MANIFEST = ".relations_manifest.json"


def cache_root() -> str:
  """Where URL inputs are copied (created on demand)."""
  base = os.environ.get("RELATIONS_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "relations"
  )
  return os.path.join(base, "remote_inputs")


def _version(path) -> list[int]:
  """[size in bytes, modification time in s] of one object: what tells a changed object."""
  st = path.stat()
  return [int(st.length), int(st.mtime or 0)]


def _listing(url: str) -> dict[str, list[int]]:
  """{relative path: _version} of the object `url`, or of every object below it ("" is the
  object itself)."""
  path = io_util.epath(url)
  if path.is_dir():
    out = {}
    todo = [(path, "")]
    while todo:  # one listing per folder (epath refuses a recursive glob on GCS)
      folder, rel = todo.pop()
      for p in folder.iterdir():
        name = f"{rel}{p.name}"
        if p.is_dir():
          todo.append((p, name + "/"))
        else:
          out[name] = _version(p)
    return out
  if not path.exists():
    raise FileNotFoundError(f"{url}: no such object or folder in the bucket")
  return {"": _version(path)}


def local_copy(path, *, siblings: tuple[str, ...] = ()) -> str:
  """A local path with the content of `path` (a local path or a URL).

  Args:
    path: local path (returned as it is) or URL of one object or of a folder (copied whole).
    siblings: names of optional objects next to a URL object that its reader looks for too (a
      Hugging Face `model.safetensors` reads the `config.json` beside it); those that exist are
      copied beside the copy.

  Returns:
    `path` for a local path; for a URL, the local copy (same base name, so readers that go by the
    file name or extension still work).

  Raises:
    FileNotFoundError: the URL names nothing.
  """
  path = os.fspath(path)
  if not io_util.is_url(path):
    return path
  url = path.rstrip("/")
  name = url.rsplit("/", 1)[-1]
  listing = _listing(url)
  parent = url.rsplit("/", 1)[0]
  extra = {}
  if "" in listing:
    for s in siblings:
      sib = io_util.epath(f"{parent}/{s}")
      if sib.exists():
        extra[s] = _version(sib)
  manifest = {"url": url, "files": listing, "siblings": extra}

  key = hashlib.sha256(url.encode()).hexdigest()[:20]
  final = os.path.join(cache_root(), key)
  target = os.path.join(final, name)
  if _manifest(final) == manifest:
    return target
  os.makedirs(cache_root(), exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".tmp_{key}_", dir=cache_root())
  try:
    for rel in listing:
      src = url if rel == "" else f"{url}/{rel}"
      dst = os.path.join(tmp, name, rel) if rel else os.path.join(tmp, name)
      _download(src, dst, listing[rel][0])
    for s, size in extra.items():
      _download(f"{parent}/{s}", os.path.join(tmp, s), size[0])
    with open(os.path.join(tmp, _MANIFEST), "w") as f:
      json.dump(manifest, f)
    # Replace a stale copy; if another process put a complete one there meanwhile, keep that.
    if os.path.isdir(final):
      stale = f"{final}.stale_{os.getpid()}"
      try:
        os.rename(final, stale)
        shutil.rmtree(stale, ignore_errors=True)
      except OSError:
        pass
    try:
      os.rename(tmp, final)
    except OSError:
      if _manifest(final) != manifest:
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return target


def _manifest(folder: str):
  try:
    with open(os.path.join(folder, _MANIFEST)) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def _download(url: str, dst: str, size: int) -> None:
  """Copies one object to the local file `dst`, checking that `size` bytes arrived."""
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with io_util.epath(url).open("rb") as src, open(dst, "wb") as out:
    shutil.copyfileobj(src, out, 1 << 22)
  got = os.path.getsize(dst)
  if got != size:
    raise OSError(f"{url}: copied {got} bytes to {dst}, the object has {size}")
