"""The trace-time state of the speed kernels: the one thread-local of nmt_tf.

While a forward pass is traced, three things hold for everything traced inside it and are not
worth an argument of every layer's `call` and `step`, every search and every export
signature:

  pass_scope      the pass's product dtype, its cache of cast weights, and whether its
                  recurrent steps take the compiled cell (precision.py `scope`)
  deferring       the time loop whose steps' products defer their invariant operands'
                  gradients to after the loop (deferred.py)
  without_lists   time loops built without TensorArrays, for the LiteRT converter (scan.py)

They are kept per thread, as Keras keeps its autocast scope and TensorFlow its default graph:
a tf.distribute strategy traces its replicas in concurrent threads, so state in a module
global or on the model would mix the replicas' passes. Only the modules of this package read
or set it, each through its own context manager.
"""

import contextlib
import threading

_state = threading.local()


def get(name):
  """The value of `name` in this thread (None when unset)."""
  return getattr(_state, name, None)


@contextlib.contextmanager
def setting(name, value):
  """Sets `name` to `value` in this thread for the block, then restores the outer value."""
  outer = get(name)
  setattr(_state, name, value)
  try:
    yield value
  finally:
    setattr(_state, name, outer)
