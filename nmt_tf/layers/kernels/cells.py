"""The elementwise part of a GRU step, in plain ops or as the compiled cell (gru_cell.cc).

docs/EQUATIONS.md, "GRU conventions"; x = W x_t + b = [x_z, x_r, x_h] [batch, 3*units]:

  reset_after(x, hu, h)     hu = U h + b_U = [u_z, u_r, u_h]                      -> h'
                              z = sigma(x_z + u_z), r = sigma(x_r + u_r)
                              h~ = tanh(x_h + r (.) u_h),  h' = z (.) h + (1 - z) (.) h~
  reset_gates(x, hu_zr, h)  reset before, ahead of U_h: hu_zr = U_zr h = [u_z, u_r]
                              -> zr = [z, r] [batch, 2*units], r (.) h [batch, units]
  update(x, u, h, zr)       reset before, after U_h: u = U_h (r (.) h)
                              h~ = tanh(x_h + u),  h' = z (.) h + (1 - z) (.) h~  -> h'

The compiled cell computes the same values in one pass over the rows forward and one
backward (registered gradients, compiled.py) instead of about ten ops each way. A float32
step takes it inside a forward pass whose scope asks for it (precision.py `scope`
compiled_cell: the training passes, as Seq2Seq resolves KernelOptions.compiled_cell) when the
library loads; every other step, and every export, runs the plain ops below.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import compiled
from nmt_tf.layers.kernels import trace_state


def _library(x):
  """The compiled library if this step takes it, else None."""
  scope = trace_state.get("pass_scope")
  if scope is None or not scope.compiled_cell or x.dtype != tf.float32:
    return None
  return compiled.library()


def reset_after(x, hu, h):
  """h' [batch, units] of the reset-after GRU (module docstring)."""
  library = _library(x)
  if library is not None:
    return library.nmt_gru_gates(x, hu, h)[0]
  x_z, x_r, x_h = tf.split(x, 3, axis=-1)  # 3 x [batch, units]
  u_z, u_r, u_h = tf.split(hu, 3, axis=-1)
  z = tf.sigmoid(x_z + u_z)
  r = tf.sigmoid(x_r + u_r)
  h_tilde = tf.tanh(x_h + r * u_h)
  return z * h + (1.0 - z) * h_tilde


def reset_gates(x, hu_zr, h):
  """(zr [batch, 2*units], r (.) h [batch, units]) of the reset-before GRU."""
  library = _library(x)
  if library is not None:
    return tuple(library.nmt_gru_reset_gates(x, hu_zr, h))
  x_zr, _ = tf.split(x, [2 * h.shape[-1], -1], axis=-1)  # [batch, 2*units]
  zr = tf.sigmoid(x_zr + hu_zr)  # [z, r] [batch, 2*units]
  _, r = tf.split(zr, 2, axis=-1)
  return zr, r * h


def update(x, u, h, zr):
  """h' [batch, units] of the reset-before GRU from u = U_h (r (.) h)."""
  library = _library(x)
  if library is not None:
    return library.nmt_gru_update(x, u, h, zr)[0]
  _, x_h = tf.split(x, [2 * h.shape[-1], -1], axis=-1)  # [batch, units]
  z, _ = tf.split(zr, 2, axis=-1)
  h_tilde = tf.tanh(x_h + u)
  return z * h + (1.0 - z) * h_tilde
