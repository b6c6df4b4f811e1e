"""The compiled GRU cell: gru_cell.cc built once per TensorFlow version and machine.

The C++ source ships in the package. On first use (or at set-up: `python -m
nmt_tf.layers.kernels.compiled`) it is compiled with the machine's C++ compiler (`$CXX`,
default g++) and `tf.sysconfig`'s flags into the cache folder (`$NMT_TF_CACHE_DIR`, default
~/.cache/nmt_tf), under a name that carries a hash of the source, the flags, TensorFlow's
version and the CPU's instruction sets, then loaded with `tf.load_op_library`. Concurrent
processes build it once (a file lock). Where that is impossible (no compiler, a build that
fails) or `NMT_TF_COMPILED_CELL=0`, `library()` is None and the GRU steps run on plain ops
(cells.py); `unavailable_reason()` says why in one line. The ops' gradients are registered
in cells.py.
"""

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import threading

import tensorflow as tf

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gru_cell.cc")
SWITCH = "NMT_TF_COMPILED_CELL"
_lock = threading.Lock()
_state = {}  # "library", "reason": the outcome of the first `library()` call


def cache_dir():
  """Where the compiled library is kept."""
  root = os.environ.get("NMT_TF_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nmt_tf")
  return os.path.join(root, "ops")


def _cpu_flags():
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith(("flags", "Features")):
          return line
  except OSError:
    pass
  return ""


def build_command(output):
  """The compiler's command line for `output`: optimized for this machine's CPU (AVX512-FP16
  off: Eigen's half-precision packets do not build with it)."""
  compiler = os.environ.get("CXX", "g++")
  arch = ["-march=native"] + (["-mno-avx512fp16"] if "avx512_fp16" in _cpu_flags() else [])
  return ([compiler, "-O3", *arch, "-shared", "-fPIC", "-w", SOURCE, "-o", output]
          + tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags())


def library_path():
  """The cache path of the library for this source, TensorFlow, compiler flags and CPU."""
  with open(SOURCE, "rb") as f:
    digest = hashlib.sha256(f.read())
  digest.update(" ".join(a for a in build_command("") if a != SOURCE).encode())
  digest.update((tf.__version__ + _cpu_flags()).encode())
  return os.path.join(cache_dir(), f"gru_cell-tf{tf.__version__}-{digest.hexdigest()[:16]}.so")


def _build(path):
  """Compiles the library into `path` unless another process did; returns an error line or
  None."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if os.path.exists(path):
      return None
    print(f"nmt_tf: compiling the GRU cell for TensorFlow {tf.__version__} (once per version "
          "and machine, about 20 s) ...", file=sys.stderr, flush=True)
    fd, staging = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
      done = subprocess.run(build_command(staging), capture_output=True, text=True,
                            check=False)
    except OSError as e:
      os.unlink(staging)
      return f"no C++ compiler ({e.strerror}: {build_command('')[0]})"
    if done.returncode != 0:
      os.unlink(staging)
      first = next((l for l in done.stderr.splitlines() if "error" in l), done.stderr.strip())
      return f"the build failed: {first[:300]}"
    os.replace(staging, path)
  return None


def _load():
  if os.environ.get(SWITCH, "1") == "0":
    return None, f"{SWITCH}=0"
  path = library_path()
  try:
    error = None if os.path.exists(path) else _build(path)
  except OSError as e:
    error = f"cannot write {cache_dir()} ({e.strerror}); set NMT_TF_CACHE_DIR"
  if error:
    return None, error
  try:
    return tf.load_op_library(path), None
  except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as e:
    return None, f"{path} does not load ({str(e).splitlines()[0][:200]}); delete it to rebuild"


def library():
  """The loaded op library, or None where it cannot be had (`unavailable_reason`)."""
  with _lock:
    if "library" not in _state:
      _state["library"], _state["reason"] = _load()
    return _state["library"]


def unavailable_reason():
  """Why `library()` is None, in one line; None when it is loaded."""
  library()
  return _state["reason"]


if __name__ == "__main__":  # set-up: build now, say whether it loads
  loaded = library()
  print("nmt_tf: the compiled GRU cell is " +
        ("ready" if loaded is not None else f"unavailable: {unavailable_reason()}"))
