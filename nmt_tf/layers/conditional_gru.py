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
    layer_norm: layer-normalized GRUs (layers/gru.py), as Nematus' cGRU.
  """

  def __init__(self, units, attention=None, layer_norm=False, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    if isinstance(attention, dict):
      attention = keras.saving.deserialize_keras_object(attention)
    self.attention = attention or BahdanauAttention(units, name="attention")
    self.layer_norm = bool(layer_norm)
    self.gru1 = GRUCell(units, reset_after=True, layer_norm=layer_norm, name="gru1")
    self.gru2 = GRUCell(units, reset_after=True, layer_norm=layer_norm, name="gru2")
    self.state_size = units

  def build(self, *args, **kwargs):
    self.built = True  # the GRUs and the attention build on first use

  def project_inputs(self, y_emb):
    """GRU1's W E y + b: [..., emb_dim] -> [..., 3*units]."""
    return self.gru1.project_inputs(y_emb)

  def step(self, x_proj, s_prev, memory, keys, mask, training=False, drops=None):
    """One step j.

    Args:
      x_proj: [batch, 3*units], `project_inputs(E y_{j-1})`.
      s_prev: [batch, units], s_{j-1} (the memory RNN passes its summary s~_j instead).
      memory: [batch, src_len, mem_dim]; keys: precomputed attention keys; mask [batch, src_len].
      training: passed to the attention.
      drops: optional recurrent dropout masks (m1, m2) [batch, units] of GRU1 and GRU2
        (layers/gru.py), one per sequence.

    Returns:
      s_j [batch, units], c_j [batch, mem_dim], alpha_j [batch, src_len] float32, and the hard
      attention log-probability [batch] (zeros for soft attention).
    """
    m1, m2 = drops or (None, None)
    s_inter = self.gru1.step(x_proj, s_prev, m1)  # s'_j [batch, units]
    context, weights, log_prob = self.attention(s_inter, memory, keys, mask, training=training)
    s = self.gru2.step(self.gru2.project_inputs(context), s_inter, m2)  # [batch, units]
    return s, context, weights, log_prob

  @property
  def has_sequence(self):
    """Whether `kernels.cgru_sequence` applies: soft additive (Bahdanau) attention."""
    return isinstance(self.attention, BahdanauAttention) and self.attention.mode == "soft"

  def loop_weights(self, memory_dim, dtype, state_memory=None):
    """kernels.CGRUWeights for `kernels.cgru_sequence` over `dtype` states and annotations
    of `memory_dim` dims, the kernels in the product dtype (`kernels.weight`); with a
    StateMemory layer, its weights too (the memory RNN)."""
    if not self.gru2.built:
      self.gru2.build((None, memory_dim))
    return kernels.CGRUWeights(
        gru1=self.gru1.loop_weights(dtype),
        attention=self.attention.loop_weights(self.units, dtype),
        context_kernel=kernels.weight(self.gru2.kernel, dtype),
        context_bias=tf.convert_to_tensor(self.gru2.bias),
        gru2=self.gru2.loop_weights(dtype),
        state_memory=None if state_memory is None else state_memory.loop_weights(self.units,
                                                                                  dtype),
        context_gain=tf.convert_to_tensor(self.gru2.input_gain) if self.layer_norm else None)

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "attention": keras.saving.serialize_keras_object(self.attention),
        "layer_norm": self.layer_norm,
    }
