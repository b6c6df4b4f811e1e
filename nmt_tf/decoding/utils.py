"""Static-shape tensor helpers for the searches (beams folded into the batch)."""

import tensorflow as tf


def tile_beams(structure, beam_size):
  """Repeats every tensor of a nested structure `beam_size` times along the batch.

  Row `b * beam_size + k` of the result is beam k of sentence b.

  Args:
    structure: nested structure of tensors [batch, ...].
    beam_size: python int.

  Returns:
    The same structure with tensors [batch * beam_size, ...].
  """
  return tf.nest.map_structure(lambda x: tf.repeat(x, beam_size, axis=0), structure)


def gather_rows(structure, indices):
  """Reorders the leading dimension of every tensor of a nested structure.

  Args:
    structure: nested structure of tensors [rows, ...].
    indices: int32 [new_rows] row indices.

  Returns:
    The same structure with tensors [new_rows, ...].
  """
  return tf.nest.map_structure(lambda x: tf.gather(x, indices, axis=0), structure)


def keep_shapes(new, old):
  """`new` with the static shapes of `old`, a nested structure of the same tensors one step
  earlier: the loop variables of a search keep their shapes, but shapes inferred from a value
  captured by the loop body (such as a batch size) are lost inside it, and tf.while_loop
  refuses a variable whose static shape becomes less specific.

  Args:
    new: nested structure of tensors, the body's outputs.
    old: the same structure, the loop variables (static shapes compatible with `new`), or
      their shape invariants (tf.TensorShape).

  Returns:
    `new`, each tensor's static shape merged with that of its loop variable.
  """
  for x, y in zip(tf.nest.flatten(new), tf.nest.flatten(old)):
    x.set_shape(y if isinstance(y, tf.TensorShape) else y.shape)  # merges; raises if not
  return new


def shape_invariants(loop, open_key=None):
  """Static shapes of a search's loop variables `loop` (a dict), with the leading (batch)
  dimension of every tensor under `loop[open_key]` left open: the entries that shrink when
  the batch is compacted."""
  shapes = tf.nest.map_structure(lambda x: x.shape, loop)
  if open_key is not None:
    shapes[open_key] = tf.nest.map_structure(
        lambda x: tf.TensorShape([None]).concatenate(x.shape[1:]), loop[open_key])
  return shapes


def search_loop(step_fn, tokens, state, context, start, advance, stop, max_length,
                compact=None):
  """The step loop that greedy and beam search share.

  Step 0 is taken before the loop: its attention [rows, src_len] reveals src_len, which the
  search needs to allocate its buffers (`start`). Every step then runs

    logits, attention, new_state = step_fn(active["tokens"], active["state"],
                                           active["context"], time)
    loop = advance(time, logits, attention, new_state, loop)   # time + 1
    loop = compact(loop)                                         # when compacting

  in a tf.while_loop of at most max_length - 1 further steps that ends once `stop(loop)`.

  Args:
    step_fn: the decoder step, `(ids [rows], state, context, time) -> (logits [rows, vocab],
      attention [rows, src_len], new_state)`.
    tokens, state, context: the inputs of step 0 ([rows, ...] each).
    start: `start(attention) -> loop`, the loop variables (a dict with "time" set by
      `advance` and "active" holding "tokens", "state" and "context").
    advance: the search's update from one step's outputs.
    stop: `stop(loop) -> bool scalar`, every sentence done.
    max_length: static python int, the steps' bound.
    compact: optional `compact(loop) -> loop` that drops finished sentences from
      loop["active"] (whose leading dimension is then left open).

  Returns:
    The loop variables after the last step.
  """
  time = tf.constant(0, tf.int32)
  logits, attention, new_state = step_fn(tokens, state, context, time)
  loop = advance(time, logits, attention, new_state, start(attention))

  if tf.executing_eagerly():
    # A search run eagerly (a few sentences: inference/batch_translate.py EAGER_LINES) calls
    # the step as one traced graph: 170-460 eager ops of about 100 µs each per step cost more
    # than tracing it once (docs/PERFORMANCE.md, "Start-up of translate"). Step 0 above ran
    # eagerly, so the weights' casts it cached are captured, not made at every step.
    step_fn = tf.function(step_fn, reduce_retracing=True, autograph=False)

  def body(loop):
    active = loop["active"]
    logits, attention, new_state = step_fn(active["tokens"], active["state"],
                                           active["context"], loop["time"])
    loop = advance(loop["time"], logits, attention, new_state, loop)
    if compact is not None:
      loop = compact(loop)
    return (keep_shapes(loop, invariants),)

  invariants = shape_invariants(loop, "active" if compact is not None else None)
  (loop,) = tf.while_loop(lambda loop: tf.logical_not(stop(loop)), body, (loop,),
                          maximum_iterations=max_length - 1, shape_invariants=(invariants,))
  return loop


def write_at(buffer, time, values, rows=None):
  """Writes `values` at index `time` of axis 1 of a preallocated buffer (static shape).

  Args:
    buffer: tensor [rows, max_length, ...].
    time: scalar int32 tensor.
    values: tensor [rows, ...] of the buffer's dtype, or [n, ...] with `rows`.
    rows: optional int32 [n]: the buffer rows that `values` go to (the others keep theirs).

  Returns:
    The updated buffer [rows, max_length, ...].
  """
  if rows is not None:
    at = tf.stack([rows, tf.fill(tf.shape(rows), time)], axis=1)  # [n, 2]
    return tf.tensor_scatter_nd_update(buffer, at, values)
  max_length = buffer.shape[1] if buffer.shape[1] is not None else tf.shape(buffer)[1]
  at_time = tf.equal(tf.range(max_length), time)  # [max_length]
  at_time = tf.reshape(at_time, [1, -1] + [1] * (buffer.shape.rank - 2))
  return tf.where(at_time, tf.expand_dims(values, 1), buffer)


def source_mask(src_length, src_len):
  """True on real source positions, or None when lengths are unknown.

  Args:
    src_length: optional int [rows] source lengths.
    src_len: scalar, the padded source length (attention width).

  Returns:
    bool [rows, src_len] or None.
  """
  if src_length is None:
    return None
  return tf.sequence_mask(src_length, src_len)


def top_k(values, k):
  """tf.math.top_k(values, k) over the last axis of values [rows, n], n static: the same
  values and indices, ties included, in a fraction of the time when n is large.

  TensorFlow's CPU kernel compares every element with a heap of the k best; beam search asks
  for 2 * beam of batch rows of beam * vocab (40,000) elements each (timed in
  docs/PERFORMANCE.md). Here the row is cut into chunks of `size` elements: the maxima of the chunks
  (one vectorized reduction) choose the k chunks with the largest maxima (ties: the lower
  chunk), which hold the k largest elements: an element outside them has k elements ranked
  before it, the maxima of the chosen chunks. The final top_k runs on k * size elements.

  Args:
    values: float [rows, n] with a static n.
    k: python int.

  Returns:
    (values [rows, k], indices int32 [rows, k]), as tf.math.top_k with sorted=True.
  """
  n = values.shape[-1]
  size = _chunk_size(n, k)
  if size is None:
    return tf.math.top_k(values, k=k)
  rows = tf.shape(values)[0]
  chunks = tf.reshape(values, [rows, n // size, size])  # [rows, chunks, size]
  _, best = tf.math.top_k(tf.reduce_max(chunks, axis=-1), k=k)  # [rows, k] chunk indices
  best = tf.sort(best, axis=-1)  # in index order, so that ties keep top_k's lower index first
  candidates = tf.reshape(tf.gather(chunks, best, batch_dims=1), [rows, k * size])
  top_values, at = tf.math.top_k(candidates, k=k)  # [rows, k]
  indices = tf.gather(best, at // size, batch_dims=1) * size + at % size  # [rows, k]
  return top_values, indices


def _chunk_size(n, k, target=128):
  """The divisor of n nearest to `target` that leaves at least 4 k chunks of at least 16,
  or None (n unknown or too small to gain)."""
  if n is None or n < 64 * k:
    return None
  divisors = [d for d in range(16, n // (4 * k) + 1) if n % d == 0]
  return min(divisors, key=lambda d: abs(d - target)) if divisors else None
