"""Per-thread settings that a `with` block overrides while functions are traced.

tf.distribute runs one replica per thread, so the layers' trace-time switches (deferred
gradients, fused kernels, the loss form) live in `threading.local()` objects.
"""

import contextlib

_UNSET = object()


@contextlib.contextmanager
def override(local, name, value):
  """Sets `local.<name>` to `value` inside the block and restores what it was after."""
  previous = getattr(local, name, _UNSET)
  setattr(local, name, value)
  try:
    yield value
  finally:
    if previous is _UNSET:
      delattr(local, name)
    else:
      setattr(local, name, previous)
