"""The CPU speed path of the layers, behind one interface.

The layers state their equations and make their products through layers/ops.py, which names
these functions; how the products and the steps' elementwise work are computed fast on CPU
stays in this package:

  precision_scope(matmul_dtype)   one forward pass: matrix products in matmul_dtype (bfloat16
                                  operands of a float32 model), weights cast once, and whether
                                  the steps take the compiled cell (precision.py)
  matmul(x, w)                    x W for a weight W that every time step reuses: W cast once
                                  per pass; in a deferring time loop, dW taken after the loop
                                  in one product (deferred.py)
  matmul_transposed(x, t)         x T^T for a table T [out, in] (tied output embeddings), T
                                  cast once per pass and never copied transposed
  matmul_dtype_for(precision)     the precision_scope dtype of a train/decode precision name
  weight(w, dtype)                W cast (and sliced) once per pass
  attend(a, m), score(m, q)       sum_i a_i m_i and m_i . q with m loop-invariant (deferred.py)
  additive_score(k, q, v)         v^T tanh(k_i + q); in a training pass whose scope asks for
                                  it, the compiled cell (cells.py)
  masked_softmax(e, mask)         the attention weights over real positions (masking.py)
  segment_norm(a, units)          a GRU projection layer-normalized per gates/proposal segment
                                  (layer_norm.py)
  cells                           a GRU step's gates and state from its products: plain ops,
                                  or the compiled cell (gru_cell.cc, built and loaded by
                                  compiled.py) in a training pass whose scope asks for it
  scan_time, without_tensor_lists the graph-mode time loop of every recurrence (scan.py)
  TrainingLoops, DEFAULT_LOOPS    the loops of one model part: scan_time over the layers'
                                  `step`, with the choice's deferred gradients (loops.py)
  KernelOptions, DEFAULT_OPTIONS  the paths a user or benchmark asks for (options.py)
  KernelChoice, DEFAULT_CHOICE    what they resolve to for one model, once, where it is built

The trace-time state these functions share (the pass's scope, the deferring loop, the LiteRT
loop form) is the one thread-local of nmt_tf, in trace_state.py. This package imports nothing
else of nmt_tf.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import cells
from nmt_tf.layers.kernels import compiled
from nmt_tf.layers.kernels import deferred
from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.cells import additive_score
from nmt_tf.layers.kernels.deferred import attend, score
from nmt_tf.layers.kernels.layer_norm import segment_norm
from nmt_tf.layers.kernels.loops import DEFAULT_LOOPS, TrainingLoops
from nmt_tf.layers.kernels.masking import NEG_INF, masked_softmax
from nmt_tf.layers.kernels.options import DEFAULT_CHOICE, DEFAULT_OPTIONS, KernelChoice
from nmt_tf.layers.kernels.options import KernelOptions
from nmt_tf.layers.kernels.precision import weight
from nmt_tf.layers.kernels.scan import scan_time, without_tensor_lists

precision_scope = precision.scope
matmul_dtype_for = precision.matmul_dtype_for


def matmul(x, w, columns=None, take=None):
  """x W over the last axis, for a weight W that is the same at every time step.

  W (or its columns [begin, end), or the columns `take`) is cast to the product dtype once
  per `precision_scope`. For x [batch, in] inside a deferring time loop
  (scan.py `scan_time`) the product defers W's gradient to after the loop; any other
  x is one 2-D product.

  Args:
    x: [..., in].
    w: [in, out] variable or tensor.
    columns: optional (begin, end): multiply by w[:, begin:end] only.
    take: optional int32 [n]: multiply by the columns w[:, take] only (gathered once).

  Returns:
    [..., out] (or [..., n]) in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  w = weight(w, x.dtype, columns, take)  # [in, out] in the product dtype
  if x.shape.rank == 2:
    return deferred.matmul(x, w)  # [batch, out]
  lead = tf.shape(x)[:-1]
  y = precision.matmul(tf.reshape(x, [-1, x.shape[-1]]), w)  # [prod(lead), out]
  return tf.reshape(y, tf.concat([lead, [_dim(w, -1)]], 0))  # [..., out]


def matmul_transposed(x, table, take=None):
  """x T^T over the last axis, for a table T [out, in] that every step reuses (an embedding
  table as the output projection): T cast once per pass (`weight`) and transposed inside the
  product, never copied.

  Args:
    x: [..., in].
    table: [out, in] variable.
    take: optional int32 [n]: the rows T[take] only (gathered once per pass).

  Returns:
    [..., out] (or [..., n]) in x's dtype.
  """
  x = tf.convert_to_tensor(x)
  t = weight(table, x.dtype, take=take, axis=0)  # [out, in] in the product dtype
  lead = tf.shape(x)[:-1]
  y = precision.matmul(tf.reshape(x, [-1, x.shape[-1]]), t, transpose_b=True)  # [n, out]
  return tf.reshape(y, tf.concat([lead, [_dim(t, 0)]], 0))  # [..., out]


def _dim(x, axis):
  """The size of x along `axis`: static where known (keeps the static shapes of reshapes)."""
  return x.shape[axis] if x.shape[axis] is not None else tf.shape(x)[axis]


__all__ = [
    "precision_scope", "matmul_dtype_for", "matmul", "matmul_transposed", "weight", "attend",
    "score", "additive_score", "segment_norm", "NEG_INF", "masked_softmax", "cells", "compiled",
    "scan_time", "without_tensor_lists", "TrainingLoops", "DEFAULT_LOOPS", "KernelOptions",
    "DEFAULT_OPTIONS", "KernelChoice", "DEFAULT_CHOICE",
]
