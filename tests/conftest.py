"""Test setup: 8 fake CPU devices, set before JAX initialises its backend."""

import os

# Must happen before `import jax` anywhere in the test process; subprocesses inherit it.
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow must not grab an accelerator on a dev box; tests are CPU-only.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
