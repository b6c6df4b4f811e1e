"""The CPU speed path of the layers, behind one interface.

The layers state their equations and make their products through these functions; how the
products are computed fast on CPU stays in this package:

  precision_scope(matmul_dtype)   one forward pass: matrix products in matmul_dtype (bfloat16
                                  operands of a float32 model), weights cast once (precision.py)
  matmul(x, w)                    x W for a weight W that every time step reuses: W cast once
                                  per pass; in a deferring time loop, dW taken after the loop
                                  in one product (deferred.py)
  matmul_transposed(x, t)         x T^T for a table T [out, in] (tied output embeddings), T
                                  cast once per pass and never copied transposed
  matmul_dtype_for(precision)     the precision_scope dtype of a train/decode precision name
  weight(w, dtype)                W cast (and sliced) once per pass, for the sequence loops
  attend(a, m), score(m, q)       sum_i a_i m_i and m_i . q with m loop-invariant (deferred.py)
  additive_score(k, q, v, fused)  v^T tanh(k_i + q), fused: one XLA kernel each way (fused.py)
  masked_softmax(e, mask)         the attention weights over real positions (masking.py)
  segment_norm(a, units)          a GRU projection layer-normalized per gates/proposal segment
                                  (layer_norm.py)
  LoopProducts                    the deferring protocol of one time loop (layers/recurrence.py)
  gru_sequences, cgru_sequence, rnnsearch_sequence, luong_sequence
                                  whole training loops with hand-written backward passes
                                  (gru_sequence.py, attention_sequence.py, luong_sequence.py),
                                  batch-major in and out
  GRUWeights, AdditiveWeights, StateMemoryWeights, TransitionWeights, CGRUWeights,
  RNNSearchWeights, LuongWeights  the typed weights those loops take, built by the layers
                                  that own them (weights.py)
  KernelOptions, DEFAULT_OPTIONS  the paths a user or benchmark asks for (options.py)
  KernelChoice, DEFAULT_CHOICE    what they resolve to for one part of one model, once, where
                                  the model is built

The precision scope and the deferring loop are trace-time state of this package; nothing
outside it touches them but through these functions. Each is kept per thread, as Keras keeps
its autocast scope and TensorFlow its default graph: a tf.distribute strategy traces its
replicas in concurrent threads, so state on the model or in a module global would mix the
replicas' casts, and handing a scope object down explicitly would add an argument to every
layer's call and step, every search and every export signature for what is one cast cache
per traced pass. This package imports nothing else of
nmt_tf, and the rest of nmt_tf imports this package, never its modules.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import deferred
from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.attention_sequence import cgru_sequence, rnnsearch_sequence
from nmt_tf.layers.kernels.deferred import LoopProducts, attend, score
from nmt_tf.layers.kernels.fused import additive_score
from nmt_tf.layers.kernels.gru_sequence import gru_sequences
from nmt_tf.layers.kernels.layer_norm import segment_norm
from nmt_tf.layers.kernels.luong_sequence import luong_sequence
from nmt_tf.layers.kernels.masking import NEG_INF, masked_softmax
from nmt_tf.layers.kernels.options import DEFAULT_CHOICE, DEFAULT_OPTIONS, KernelChoice
from nmt_tf.layers.kernels.options import KernelOptions
from nmt_tf.layers.kernels.precision import weight
from nmt_tf.layers.kernels.weights import AdditiveWeights, CGRUWeights, GRUWeights
from nmt_tf.layers.kernels.weights import LuongWeights, RNNSearchWeights, StateMemoryWeights
from nmt_tf.layers.kernels.weights import TransitionWeights

precision_scope = precision.scope
matmul_dtype_for = precision.matmul_dtype_for


def matmul(x, w, columns=None, take=None):
  """x W over the last axis, for a weight W that is the same at every time step.

  W (or its columns [begin, end), or the columns `take`) is cast to the product dtype once
  per `precision_scope`. For x [batch, in] inside a deferring time loop
  (layers/recurrence.scan_time) the product defers W's gradient to after the loop; any other
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
    "score", "additive_score", "segment_norm", "NEG_INF", "masked_softmax", "LoopProducts",
    "gru_sequences", "cgru_sequence", "rnnsearch_sequence", "luong_sequence", "GRUWeights", "AdditiveWeights",
    "StateMemoryWeights", "TransitionWeights", "CGRUWeights", "RNNSearchWeights", "LuongWeights", "KernelOptions",
    "DEFAULT_OPTIONS", "KernelChoice", "DEFAULT_CHOICE",
]
