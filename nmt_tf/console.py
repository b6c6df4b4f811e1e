"""What reaches the user's terminal from native code: TensorFlow's C++ log lines, and the
messages libraries print straight to file descriptor 2.

TensorFlow logs from C++ (oneDNN notices, `E0000 ...` lines, the LiteRT converter's warnings)
to file descriptor 2, partly before TF_CPP_MIN_LOG_LEVEL is read. Python's own stderr is the
same descriptor, so these cannot be told apart by Python's logging:

  filter_native_logs()     for a whole command: descriptor 2 becomes a pipe read by a thread
                           that drops the lines in the C++ log formats (`I0000 00:00:...`,
                           `W1203 ...`, `2026-12-03 07:54:42.1: W tensorflow/...`) and passes
                           every other line on; Python's sys.stderr writes to the terminal
                           directly. Fatal (F) lines always pass.
  native_stderr_silenced() for one call whose native library prints junk of its own (libjpeg's
                           "Improper call to JPEG library" before the Python error is raised).
"""

import atexit
import contextlib
import os
import re
import sys
import threading

# absl's C++ format (`E0000 00:00:1733212482.123456 1234 file.cc:12] text`) and TensorFlow's
# older one (`2026-12-03 07:54:42.123456: W tensorflow/core/... text`); not F (fatal).
_NATIVE_LOG = re.compile(rb"^(?:[IWE]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: "
                         rb"[IWE] )")


def is_native_log(line):
  """Whether a line (bytes) is a C++ log line of TensorFlow or absl below FATAL."""
  return bool(_NATIVE_LOG.match(line))


def filter_native_logs():
  """Filters the native log lines out of descriptor 2 for the rest of the process (see the
  module docstring). Returns the thread that forwards the other lines."""
  sys.stderr.flush()
  terminal = os.dup(2)
  read_end, write_end = os.pipe()
  os.dup2(write_end, 2)
  os.close(write_end)
  # Python's stderr goes to the terminal itself: its lines never wait behind the pipe.
  sys.stderr = os.fdopen(terminal, "w", buffering=1, encoding=sys.stderr.encoding,
                         errors=sys.stderr.errors, closefd=False)

  def forward():
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
      pending = b""
      while True:
        block = pipe.read(65536)
        if not block:
          break
        lines = (pending + block).split(b"\n")
        pending = lines.pop()
        kept = [line + b"\n" for line in lines if not is_native_log(line)]
        if kept:
          os.write(terminal, b"".join(kept))
      if pending and not is_native_log(pending):
        os.write(terminal, pending)

  thread = threading.Thread(target=forward, name="native-stderr", daemon=True)
  thread.start()

  def drain():  # at exit: end the pipe, so that the thread forwards what is left
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    thread.join(timeout=2)

  atexit.register(drain)
  return thread


@contextlib.contextmanager
def native_stderr_silenced():
  """Within the block, what native code writes to descriptor 2 is discarded; Python's
  sys.stderr is untouched when it writes elsewhere (filter_native_logs)."""
  try:
    sys.stderr.flush()
  except (AttributeError, ValueError):
    pass
  saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 2)
  try:
    yield
  finally:
    os.dup2(saved, 2)
    os.close(null)
    os.close(saved)
