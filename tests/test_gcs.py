"""gs:// paths against a real GCS JSON API: fake-gcs-server on loopback (tests/gcs_emulator.py).

What a TPU pod launch reads and writes in a bucket: the workdir (checkpoints through orbax and
TensorStore, the run's json files through etils.epath), init_from checkpoints, annotations and
prediction files read through `relations.remote_inputs.local_copy`. Nothing may land in a local
`gs:` folder (the old `os.path.abspath("gs://b")` bug), which every test checks.

TensorBoard event files go through TensorFlow's own GCS client, which no emulator reaches, so
training runs here set `tensorboard=false`; everything else is the real path.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations import io_util, remote_inputs
from relations.train import config_util
from tests.gcs_emulator import Emulator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "relations-test"
TOTAL = 8


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """The emulator with one bucket; this process's environment points epath/gcsfs at it."""
  tmp = tmp_path_factory.mktemp("gcs")
  server = Emulator(str(tmp / "server"))
  saved = dict(os.environ)
  try:
    server.create_bucket(BUCKET)
    os.environ.update(server.env(), RELATIONS_CACHE_DIR=str(tmp / "cache"))
    yield server
  finally:
    os.environ.clear()
    os.environ.update(saved)
    server.stop()


def _no_local_gs(*dirs):
  for d in dirs:
    for root, names, files in os.walk(d):
      assert not [n for n in names + files if n.startswith("gs:")], f"a local gs: entry in {root}"
      names[:] = [n for n in names if n not in (".git", ".venv", "__pycache__")]


def _read(path) -> str:
  with open(path) as f:
    return f.read()


def _upload(url, data: bytes):
  io_util.write_bytes_atomic(url, data)


# ------------------------------------------------------------------------------ remote_inputs


def test_gcs_local_copy_of_object_folder_and_changed_object(gcs, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  base = f"gs://{BUCKET}/inputs"
  _upload(f"{base}/ckpt/model.safetensors", b"w" * 10)
  _upload(f"{base}/ckpt/config.json", b'{"a": 1}')
  _upload(f"{base}/tok/vocab.json", b"{}")
  _upload(f"{base}/tok/sub/merges.txt", b"a b\n")

  # One object with the sibling its reader looks for; a missing sibling is no error.
  weights = remote_inputs.local_copy(
    f"{base}/ckpt/model.safetensors", siblings=("config.json", "preprocessor_config.json")
  )
  assert os.path.basename(weights) == "model.safetensors"
  assert _read(weights) == "w" * 10
  folder = os.path.dirname(weights)
  assert sorted(n for n in os.listdir(folder) if not n.startswith(".")) == [
    "config.json",
    "model.safetensors",
  ]
  # A folder is copied whole, sub-folders included.
  tok = remote_inputs.local_copy(f"{base}/tok")
  assert _read(os.path.join(tok, "sub", "merges.txt")) == "a b\n"
  assert os.path.basename(tok) == "tok"
  # A second call reuses the copy; a changed object is copied again; no temporary left over.
  assert remote_inputs.local_copy(f"{base}/tok") == tok
  _upload(f"{base}/tok/vocab.json", b'{"x": 0}')
  assert remote_inputs.local_copy(f"{base}/tok") == tok
  assert _read(os.path.join(tok, "vocab.json")) == '{"x": 0}'
  assert not [n for n in os.listdir(remote_inputs.cache_root()) if n.startswith(".tmp_")]
  # A local path is returned as it is; a URL naming nothing says so.
  assert remote_inputs.local_copy("relative/path") == "relative/path"
  with pytest.raises(FileNotFoundError, match=f"gs://{BUCKET}/inputs/nothing: no such object"):
    remote_inputs.local_copy(f"{base}/nothing")
  _no_local_gs(str(tmp_path))


# ------------------------------------------------------------------------------ init_from


def test_gcs_init_from_url_is_imported(gcs, tmp_path, monkeypatch):
  """A big_vision .npz in the bucket as `model.init_from` fills the occlusion model's ViT."""
  monkeypatch.chdir(tmp_path)
  from relations.nn import vit  # pylint: disable=g-import-not-at-top
  from relations.occlusion import task  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(os.path.join(ROOT, "configs/occlusion.py:tiny"))
  model = task.make_model(config)
  size = int(config.data.image_size) if config.data.get("image_size") else 64
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, size, size, 3))))
  params = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes["params"])
  prefix = task.vit_path(config)
  vit_params = params
  for k in prefix:
    vit_params = vit_params[k]
  rng = np.random.default_rng(0)
  ckpt = {
    k: rng.standard_normal(v.shape).astype(np.float32)
    for k, v in vit.flatten_params(vit_params).items()
  }
  local = tmp_path / "vit.npz"
  np.savez(local, **ckpt)
  url = f"gs://{BUCKET}/pretrained/vit.npz"
  _upload(url, local.read_bytes())
  os.remove(local)
  with config.unlocked():
    config.model.init_from = url
  loaded = task.load_pretrained(config, params)
  got = loaded
  for k in prefix:
    got = got[k]
  flat = vit.flatten_params(got)
  assert sorted(flat) == sorted(ckpt)
  for k, v in ckpt.items():
    np.testing.assert_array_equal(flat[k], v, err_msg=k)
  _no_local_gs(str(tmp_path))
