"""A graph-mode loop over time shared by every recurrent layer and decoder.

`scan_time` runs `step(x_t, state, t) -> (outputs_t, new_state)` over the time axis of batch-major
inputs with a `tf.while_loop` and TensorArrays: no Python loop over time steps ends up in the
graph, and the state may hold buffers (e.g. the memory RNN's previous states) without being
stacked once per step as `tf.scan` would. With `defer=True` the gradients of loop-invariant
operands of the steps' products (recurrent kernels, attended annotations) are taken after the
loop in one product each instead of step by step (deferred.py `LoopProducts`).

Inside `without_tensor_lists()` the loop reads its inputs with a gather and writes its outputs
into preallocated [time, batch, ...] buffers instead of TensorArrays: the same values, in ops
that the LiteRT converter lowers to builtins (it cannot lower tensor lists whose elements have
a dynamic batch size).
"""

import contextlib

import tensorflow as tf

from nmt_tf.layers.kernels import trace_state
from nmt_tf.layers.kernels.deferred import LoopProducts


def without_tensor_lists():
  """Within this context, `scan_time` builds its loops without TensorArrays (see above)."""
  return trace_state.setting("without_lists", True)


def _write_row(buffer, t, value):
  """buffer [time, ...] with row t replaced by value [...]."""
  at_t = tf.equal(tf.range(tf.shape(buffer)[0]), t)  # [time]
  at_t = tf.reshape(at_t, [-1] + [1] * (buffer.shape.rank - 1))
  return tf.where(at_t, value[None], buffer)


def scan_time(step, inputs, initial_state, length=None, defer=None):
  """Runs `step` over axis 1 of every tensor in `inputs`.

  Args:
    step: callable `(x_t, state, t) -> (outputs_t, new_state)`; `x_t` has the structure of
      `inputs` with the time axis removed, `t` is a scalar int32 tensor, `outputs_t` any nested
      structure of tensors with leading batch dim.
    inputs: nested structure of tensors [batch, time, ...] (all with the same time length).
    initial_state: nested structure of tensors, the state before step 0.
    length: optional scalar number of steps; defaults to the time length of `inputs`.
    defer: route the steps' products made through `matmul`, `attend` and `score` so
      that the gradients of their loop-invariant operands are computed after the loop (same
      values); KernelOptions.defer_gradients. None = when the inputs are bfloat16, where
      gradient sums inside the loop are slow on CPU (docs/PERFORMANCE.md, "Design choices,
      measured": loop-invariant weight gradients after the loop).

  Returns:
    (outputs, final_state): `outputs` has the structure of `outputs_t`, each tensor stacked to
    [batch, time, ...].
  """
  flat_inputs = tf.nest.flatten(inputs)
  time_major = [tf.transpose(x, _time_major_perm(x)) for x in flat_inputs]  # [time, batch, ...]
  if length is None:
    length = tf.shape(time_major[0])[0]
  else:
    time_major = [x[:length] for x in time_major]  # [length, batch, ...]
  if trace_state.get("without_lists"):
    return _scan_buffers(step, inputs, time_major, initial_state, length)
  input_tas = [
      tf.TensorArray(x.dtype, size=length, element_shape=x.shape[1:]).unstack(x)
      for x in time_major
  ]
  # Step 0 is peeled out of the loop: it builds any unbuilt layer outside the while_loop and
  # gives the static output signature for the TensorArrays. Sequences have >= 1 step (BOS/EOS).
  x0 = tf.nest.pack_sequence_as(inputs, [x[0] for x in time_major])
  if defer is None:
    defer = any(x.dtype == tf.bfloat16 for x in flat_inputs)
  products = LoopProducts()
  with products.first_step() if defer else contextlib.nullcontext():
    out0, state = step(x0, initial_state, tf.constant(0, tf.int32))
  num_outputs = len(tf.nest.flatten(out0))
  # Loop outputs: the step outputs, then the operands of the deferred products.
  output_tas = [
      tf.TensorArray(o.dtype, size=length, element_shape=o.shape).write(0, o)
      for o in tf.nest.flatten(out0) + products.first_operands()
  ]
  probe_tas = [
      tf.TensorArray(p.dtype, size=length, element_shape=y.shape).unstack(p)
      for p, (_, _, _, y) in zip(products.probe_inputs(length), products.records)
  ]

  def body(t, state, tas):
    x_t = tf.nest.pack_sequence_as(inputs, [ta.read(t) for ta in input_tas])
    deferring = products.records
    with (products.loop_step([ta.read(t) for ta in probe_tas]) if deferring
          else contextlib.nullcontext()) as scope:
      out_t, new_state = step(x_t, state, t)
    values = tf.nest.flatten(out_t) + (scope.operands if deferring else [])
    tas = [ta.write(t, o) for ta, o in zip(tas, values)]
    return t + 1, new_state, tas

  _, final_state, output_tas = tf.while_loop(
      lambda t, *_: t < length,
      body,
      (tf.constant(1, tf.int32), state, output_tas),
      maximum_iterations=length,
  )
  outputs = [ta.stack() for ta in output_tas]  # [time, batch, ...]
  products.set_operands(outputs[num_outputs:])
  outputs = outputs[:num_outputs]
  outputs = [tf.transpose(o, _time_major_perm(o)) for o in outputs]  # [batch, time, ...]
  return tf.nest.pack_sequence_as(out0, outputs), final_state


def _scan_buffers(step, inputs, time_major, initial_state, length):
  """scan_time's loop for inference without TensorArrays (no deferred products): inputs
  read by tf.gather, outputs written into [length, batch, ...] buffers by `_write_row`."""
  x0 = tf.nest.pack_sequence_as(inputs, [x[0] for x in time_major])
  out0, state = step(x0, initial_state, tf.constant(0, tf.int32))
  buffers = [_write_row(tf.zeros(tf.concat([[length], tf.shape(o)], 0), o.dtype), 0, o)
             for o in tf.nest.flatten(out0)]  # [length, batch, ...] each

  def body(t, state, buffers):
    x_t = tf.nest.pack_sequence_as(inputs, [tf.gather(x, t) for x in time_major])
    out_t, new_state = step(x_t, state, t)
    buffers = [_write_row(b, t, o) for b, o in zip(buffers, tf.nest.flatten(out_t))]
    return t + 1, new_state, buffers

  _, final_state, buffers = tf.while_loop(
      lambda t, *_: t < length, body, (tf.constant(1, tf.int32), state, buffers),
      maximum_iterations=length)
  outputs = [tf.transpose(o, _time_major_perm(o)) for o in buffers]  # [batch, time, ...]
  return tf.nest.pack_sequence_as(out0, outputs), final_state


def _time_major_perm(x):
  """Permutation swapping the first two axes of `x`."""
  rank = x.shape.rank
  return [1, 0] + list(range(2, rank))

