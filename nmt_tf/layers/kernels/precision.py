"""Precision of the matrix products, and weights cast once per forward pass.

`scope(matmul_dtype)` (`kernels.precision_scope`) is entered by Seq2Seq around each forward
pass. Inside it:
  - `weight(w, dtype)` casts a variable to the product dtype once and reuses the cast for the
    rest of the pass. The time loops run step 0 outside the tf.while_loop, so the cast is made
    there and captured by the loop instead of being redone at every step.
  - `matmul(x, w)` multiplies in the dtype of the (cast) weight and returns x's dtype.
With matmul_dtype="bfloat16" (the "float32_bf16_matmul" training precision) the products take
bfloat16 operands (AMX or AVX512-BF16 matrix units; their peaks against float32 are in
docs/PERFORMANCE.md) while the
variables, the recurrent states, gates, attention softmax and losses stay float32: only the
products lose precision, as with TF32 on GPUs, and the elementwise ops keep float32 speed
(bfloat16 elementwise ops are several times slower than float32 on CPU).
"""

import contextlib

import tensorflow as tf

from nmt_tf.layers.kernels import trace_state


class _Scope:

  def __init__(self, matmul_dtype, compiled_cell):
    self.matmul_dtype = None if matmul_dtype is None else tf.as_dtype(matmul_dtype)
    self.compiled_cell = compiled_cell
    self.casts = {}  # id(variable), dtype -> (variable, cast tensor)


@contextlib.contextmanager
def scope(matmul_dtype=None, prefetch=(), compiled_cell=False):
  """One forward pass: products in `matmul_dtype` (None = the inputs' dtype), cached casts.

  A nested scope with the same dtype, or with None, reuses the enclosing one (encode inside
  call; a model's forward pass inside a search that chose the dtype).
  `prefetch`: variables whose casts are made on entry, e.g. before a decoding loop whose
  steps would otherwise make them inside the loop (with a matmul_dtype only).
  `compiled_cell`: the float32 recurrent steps (GRU gates, additive scores) take the compiled
  cell (cells.py), as the model's KernelOptions resolved for a training pass.
  """
  outer = trace_state.get("pass_scope")
  if matmul_dtype == "float32":
    matmul_dtype = None
  if outer is not None and (matmul_dtype is None
                            or outer.matmul_dtype == tf.as_dtype(matmul_dtype)):
    yield outer
    return
  with trace_state.setting("pass_scope", _Scope(matmul_dtype, compiled_cell)) as active:
    if active.matmul_dtype is not None:
      for w in prefetch:
        if w.dtype == tf.float32 and len(w.shape) == 2:  # kernels (embeddings are gathered)
          weight(w, tf.float32)
    yield active


def matmul_dtype_for(precision):
  """The `scope` dtype of a precision name (train.precision, decode.precision): "bfloat16"
  for float32_bf16_matmul, else None (the inputs' dtype)."""
  return "bfloat16" if precision == "float32_bf16_matmul" else None


def product_dtype(dtype):
  """The dtype products of `dtype` inputs are computed in."""
  active = trace_state.get("pass_scope")
  if active is None or active.matmul_dtype is None:
    return tf.as_dtype(dtype)
  return active.matmul_dtype


def weight(w, dtype, columns=None, take=None, axis=1):
  """w cast to the product dtype for `dtype` inputs; variables once per scope.

  columns: optional (begin, end): only those columns of w, sliced once per scope too, so
  that a loop multiplying by part of a kernel (the reset-before GRU's U_zr and U_h) does not
  copy the part out of the kernel at every step.
  take: optional int32 [n] indices along `axis`: only those rows or columns of w, gathered
  once per scope too (the output layer restricted to a vocabulary shortlist).
  """
  target = product_dtype(dtype)
  active = trace_state.get("pass_scope")
  if active is None or isinstance(w, tf.Tensor):
    w = tf.cast(w, target)
    if take is not None:
      return tf.gather(w, take, axis=axis)
    return w if columns is None else w[:, columns[0]:columns[1]]
  key = (id(w), target, columns, None if take is None else (id(take), axis))
  if key not in active.casts or not _reachable(active.casts[key][1]):
    # A part is sliced or gathered from the cached cast of the whole kernel.
    if take is not None:
      part = tf.gather(weight(w, dtype), take, axis=axis)
    else:
      part = (tf.cast(w, target) if columns is None
              else weight(w, dtype)[:, columns[0]:columns[1]])
    active.casts[key] = (w, part, take)  # keeps w and take alive so that their ids stay unique
  return active.casts[key][1]


def _reachable(tensor):
  """Whether `tensor` may be used here: eager, or from this graph or one enclosing it (a
  tf.while_loop body captures tensors of its outer graphs, not of sibling graphs)."""
  if not hasattr(tensor, "graph") or tf.executing_eagerly():
    return not hasattr(tensor, "graph")
  graph = tf.compat.v1.get_default_graph()
  while graph is not None:
    if graph is tensor.graph:
      return True
    graph = getattr(graph, "outer_graph", None)
  return False


def matmul(x, w, transpose_b=False):
  """x [n, in] @ w [in, out] (or @ w^T) in w's dtype (see `weight`), returned in x's dtype."""
  y = tf.matmul(tf.cast(x, w.dtype), w, transpose_b=transpose_b)  # [n, out]
  return tf.cast(y, x.dtype)
