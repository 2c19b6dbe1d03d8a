"""Locating Java and the jars that pycocoevalcap 1.2 ships.

The official VisualCOMET metrics run two Java programs: the Stanford CoreNLP
3.4.1 PTBTokenizer and METEOR 1.5.  pycocoevalcap 1.2 (PyPI) ships both jars
(byte-identical to the ones in jamespark3922/coco-caption), so we use its
installed copies instead of vendoring 60 MB of jars.  Set
``RELATIONS_PYCOCOEVALCAP_DIR`` to point at another copy of the package
directory (the one holding ``tokenizer/`` and ``meteor/``).
"""

import importlib.util
import os
import shutil

ENV_DIR = "RELATIONS_PYCOCOEVALCAP_DIR"


class JavaNotFoundError(RuntimeError):
  """Raised when a metric needs Java but no `java` executable is available."""


def java_executable(purpose: str) -> str:
  """Returns the path of `java` or raises JavaNotFoundError naming `purpose`."""
  java = shutil.which("java")
  if java is None:
    raise JavaNotFoundError(
      f"{purpose} needs Java (OpenJDK 11 or 17 works), but no `java` "
      "executable is on PATH. Install a JRE (e.g. `apt-get install "
      "openjdk-17-jre-headless`) and retry."
    )
  return java


def pycocoevalcap_dir() -> str:
  """Directory of the installed pycocoevalcap package (holds the jars)."""
  override = os.environ.get(ENV_DIR)
  if override:
    if not os.path.isdir(override):
      raise FileNotFoundError(f"${ENV_DIR}={override!r} is not a directory.")
    return override
  spec = importlib.util.find_spec("pycocoevalcap")
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(
      "pycocoevalcap==1.2 is not installed; it ships the Stanford "
      "PTBTokenizer and METEOR 1.5 jars the official metrics need "
      f"(`pip install pycocoevalcap==1.2`, or set ${ENV_DIR})."
    )
  return list(spec.submodule_search_locations)[0]


def _existing(path: str) -> str:
  if not os.path.isfile(path):
    raise FileNotFoundError(f"Missing jar {path} (incomplete pycocoevalcap?).")
  return path


def corenlp_jar() -> str:
  """Path of stanford-corenlp-3.4.1.jar."""
  return _existing(os.path.join(pycocoevalcap_dir(), "tokenizer", "stanford-corenlp-3.4.1.jar"))


def meteor_jar() -> str:
  """Path of meteor-1.5.jar (its data/paraphrase-en.gz lies next to it)."""
  return _existing(os.path.join(pycocoevalcap_dir(), "meteor", "meteor-1.5.jar"))
