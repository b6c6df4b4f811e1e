"""Conditional GRU of dl4mt / Nematus (`gru_cond_layer`), docs/EQUATIONS.md "cgru".

Per target step j:
  1. s'_j = GRU1(E y_{j-1}, s_{j-1})        reset-after
  2. c_j  = ATT(C, q = s'_j)                 e_ij = v^T tanh(U_a s'_j + W_a h_i)
  3. s_j  = GRU2(input c_j, state s'_j)      reset-after: s~ = tanh(W c_j + r (.) (U s'_j))
"""

import keras
import tensorflow as tf

from nmt_tf.layers import kernels
from nmt_tf.layers.attention import BahdanauAttention
from nmt_tf.layers.gru import GRUCell


@keras.saving.register_keras_serializable(package="nmt_tf")
class ConditionalGRUCell(keras.layers.Layer):
  """GRU -> attention on the intermediate state -> GRU, one target step per `step` call.

  GRU1's input projection W E y depends only on the target prefix: `project_inputs` computes
  it for all steps at once in teacher-forced training; the attention keys come from
  `attention.precompute_keys(memory)`.

  Args:
    units: positive int, the decoder state size d.
    attention: an attention layer (default: BahdanauAttention(units)); any layer of
      nmt_tf.layers.attention works.
  """

  def __init__(self, units, attention=None, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    if isinstance(attention, dict):
      attention = keras.saving.deserialize_keras_object(attention)
    self.attention = attention or BahdanauAttention(units, name="attention")
    self.gru1 = GRUCell(units, reset_after=True, name="gru1")
    self.gru2 = GRUCell(units, reset_after=True, name="gru2")
    self.state_size = units

  def build(self, *args, **kwargs):
    self.built = True  # the GRUs and the attention build on first use

  def project_inputs(self, y_emb):
    """GRU1's W E y + b: [..., emb_dim] -> [..., 3*units]."""
    return self.gru1.project_inputs(y_emb)

  def step(self, x_proj, s_prev, memory, keys, mask, training=False,
           kernel_options=kernels.DEFAULT_OPTIONS):
    """One step j.

    Args:
      x_proj: [batch, 3*units], `project_inputs(E y_{j-1})`.
      s_prev: [batch, units], s_{j-1} (the memory RNN passes its summary s~_j instead).
      memory: [batch, src_len, mem_dim]; keys: precomputed attention keys; mask [batch, src_len].
      training, kernel_options: passed to the attention.

    Returns:
      s_j [batch, units], c_j [batch, mem_dim], alpha_j [batch, src_len] float32, and the hard
      attention log-probability [batch] (zeros for soft attention).
    """
    s_inter = self.gru1.step(x_proj, s_prev)  # s'_j [batch, units]
    context, weights, log_prob = self.attention(s_inter, memory, keys, mask, training=training,
                                                kernel_options=kernel_options)
    s = self.gru2.step(self.gru2.project_inputs(context), s_inter)  # [batch, units]
    return s, context, weights, log_prob

  @property
  def has_sequence(self):
    """Whether `sequence` applies: soft additive (Bahdanau) attention."""
    return isinstance(self.attention, BahdanauAttention) and self.attention.mode == "soft"

  def sequence(self, x_proj, s0, memory, keys, mask, fused=False, state_memory=None):
    """All target steps at once with the hand-written backward pass of
    `kernels.cgru_sequence` (the same values as `step` at every position).

    Args:
      x_proj: [batch, time, 3*units], `project_inputs` of the embedded target prefix.
      s0: [batch, units]; memory, keys, mask: as for `step`.
      fused: the scores' kernels (`kernels.use_fused`).
      state_memory: optional StateMemory layer: GRU1 reads its summary s~_j of s_0..s_{j-1}
        instead of s_{j-1} (the memory RNN).

    Returns:
      s [batch, time, units], c [batch, time, mem_dim], alpha [batch, time, src_len] float32,
      and with state_memory s~ [batch, time, units].
    """
    if not self.has_sequence:
      raise ValueError("ConditionalGRUCell.sequence needs soft additive attention; use `step`.")
    if not self.gru2.built:
      self.gru2.build((None, memory.shape[-1]))
    dtype = x_proj.dtype
    weights = {
        **self.attention.loop_weights(self.units, dtype),  # wq, v
        "u1": kernels.weight(self.gru1.recurrent_kernel, dtype),
        "bu1": tf.convert_to_tensor(self.gru1.recurrent_bias),
        "w2": kernels.weight(self.gru2.kernel, memory.dtype),
        "b2": tf.convert_to_tensor(self.gru2.bias),
        "u2": kernels.weight(self.gru2.recurrent_kernel, dtype),
        "bu2": tf.convert_to_tensor(self.gru2.recurrent_bias),
    }
    if state_memory is not None:
      weights.update(state_memory.loop_weights(self.units, dtype))  # wm, bm, ws, vm
    outputs = kernels.cgru_sequence(tf.transpose(x_proj, [1, 0, 2]), s0, memory, keys, mask,
                                    weights, fused,
                                    state_memory=state_memory is not None)  # time-major
    return [tf.transpose(o, [1, 0, 2]) for o in outputs]

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "attention": keras.saving.serialize_keras_object(self.attention),
    }
