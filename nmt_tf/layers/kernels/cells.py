"""The elementwise part of a recurrent step, in plain ops or as the compiled cell (gru_cell.cc):
a GRU's gates and new state, and the additive attention score.

docs/EQUATIONS.md, "GRU conventions"; x = W x_t + b = [x_z, x_r, x_h] [batch, 3*units]:

  reset_after(x, hu, h)     hu = U h + b_U = [u_z, u_r, u_h]                      -> h'
                              z = sigma(x_z + u_z), r = sigma(x_r + u_r)
                              h~ = tanh(x_h + r (.) u_h),  h' = z (.) h + (1 - z) (.) h~
  reset_gates(x, hu_zr, h)  reset before, ahead of U_h: hu_zr = U_zr h = [u_z, u_r]
                              -> zr = [z, r] [batch, 2*units], r (.) h [batch, units]
  update(x, u, h, zr)       reset before, after U_h: u = U_h (r (.) h)
                              h~ = tanh(x_h + u),  h' = z (.) h + (1 - z) (.) h~  -> h'

  additive_score(k, q, v)   e_i = v^T tanh(k_i + q)     [batch, n, units], [batch, units] -> [batch, n]

The compiled cell computes the same values in one pass over the rows forward and one
backward (the gradients registered below) instead of about ten ops each way, each of which
reads and writes the whole tensor; the score's backward pass recomputes the tanh rather than
keeping a [batch, n, units] tensor per step. A float32 step takes it inside a forward pass
whose scope asks for it (precision.py `scope` compiled_cell: the training passes, as Seq2Seq
resolves KernelOptions.compiled_cell) when the library loads; every other step, and every
export, runs the plain ops below. Against the plain ops and XLA-fused score kernels, with
bfloat16 products: docs/PERFORMANCE.md, "Design choices, measured".
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


def additive_score(keys, query, v):
  """e [batch, n] = v^T tanh(keys + query) over the last axis (module docstring); the plain
  ops take any keys [batch, ..., n, units] that broadcast against a query [batch, ..., units].
  """
  v = tf.cast(v, keys.dtype)
  query = tf.cast(query, keys.dtype)
  library = _library(keys)
  if library is not None and keys.shape.rank == 3 and query.shape.rank == 2:
    return library.nmt_additive_score(keys, query, v)
  hidden = tf.tanh(keys + query[..., None, :])  # [batch, n, units]
  return tf.reduce_sum(hidden * v, axis=-1)  # [batch, n]


# The compiled ops' gradients: each calls its *Grad op.


def _zeros_if_none(grad, like):
  return tf.zeros_like(like) if grad is None else grad


@tf.RegisterGradient("NmtGruGates")
def _gru_gates_grad(op, d_h_next, _):
  _, hu, h = op.inputs
  return compiled.library().nmt_gru_gates_grad(_zeros_if_none(d_h_next, h), hu, h,
                                               op.outputs[1])


@tf.RegisterGradient("NmtGruResetGates")
def _gru_reset_gates_grad(op, d_zr, d_rh):
  _, _, h = op.inputs
  zr, rh = op.outputs
  return compiled.library().nmt_gru_reset_gates_grad(_zeros_if_none(d_zr, zr),
                                                     _zeros_if_none(d_rh, rh), zr, h)


@tf.RegisterGradient("NmtGruUpdate")
def _gru_update_grad(op, d_h_next, _):
  _, _, h, zr = op.inputs
  return compiled.library().nmt_gru_update_grad(_zeros_if_none(d_h_next, h), h, zr,
                                                op.outputs[1])


@tf.RegisterGradient("NmtAdditiveScore")
def _additive_score_grad(op, d_scores):
  return compiled.library().nmt_additive_score_grad(*op.inputs, d_scores)
