"""Conditional GRU of dl4mt / Nematus (`gru_cond_layer`), docs/EQUATIONS.md "cgru".

Per target step j:
  1. s'_j = GRU1(E y_{j-1}, s_{j-1})        reset-after
  2. c_j  = ATT(C, q = s'_j)                 e_ij = v^T tanh(U_a s'_j + W_a h_i)
  3. s_j  = GRU2(input c_j, state s'_j)      reset-after: s~ = tanh(W c_j + r (.) (U s'_j))
A deep transition (transition_depth D > 2; Miceli Barone et al. 2017, Nematus'
dec_base_recurrence_transition_depth) continues with GRUs that have no input:
  4. s_j <- GRU_k(b_k, s_j)   for k = 3..D     (x = b_k: the input projection is the bias)
"""

import keras
import tensorflow as tf

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
    transition_depth: GRU transitions per step, >= 2: GRU1, GRU2 and D - 2 GRUs without input.
  """

  def __init__(self, units, attention=None, layer_norm=False, transition_depth=2, **kwargs):
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
    if not isinstance(transition_depth, int) or transition_depth < 2:
      raise ValueError(f"Received transition_depth={transition_depth!r}; expected an integer "
                       ">= 2 (GRU1 and GRU2).")
    self.transition_depth = transition_depth
    # Attributes, not a list: tf.train.Checkpoint does not look into Keras' tracked lists.
    for k in range(3, transition_depth + 1):
      setattr(self, f"gru{k}", GRUCell(units, reset_after=True, layer_norm=layer_norm,
                                       name=f"gru{k}"))
    self.state_size = units

  @property
  def deep_cells(self):
    """The GRUs without input after GRU2 (built), [GRU3, ..., GRU_D]."""
    cells = [getattr(self, f"gru{k}") for k in range(3, self.transition_depth + 1)]
    for cell in cells:
      if not cell.built:
        cell.build((None, 0))
    return cells

  def build(self, inputs_shape=None, states_shape=None, memory_shape=None):
    """The GRUs and the attention from the shapes of Keras' call form (`call`); without
    them (the decoders, which call `step`) each builds at its first use."""
    del states_shape
    if inputs_shape is not None and memory_shape is not None:
      for layer, shapes in ((self.gru1, [inputs_shape]),  # [batch, in_dim]
                            (self.attention, [(None, self.units), memory_shape]),
                            (self.gru2, [(None, memory_shape[-1])])):  # c_j [batch, mem_dim]
        if not layer.built:  # a loaded attention arrives built
          layer.build(*shapes)
      self.deep_cells  # pylint: disable=pointless-statement  (builds GRU3..GRU_D)
    self.built = True

  def project_inputs(self, y_emb):
    """GRU1's W E y + b: [..., emb_dim] -> [..., 3*units]."""
    return self.gru1.project_inputs(y_emb)

  def step(self, x_proj, s_prev, memory, keys, mask, training=False, drops=None, expect=None):
    """One step j.

    Args:
      x_proj: [batch, 3*units], `project_inputs(E y_{j-1})`.
      s_prev: [batch, units], s_{j-1} (the memory RNN passes its summary s~_j instead).
      memory: [batch, src_len, mem_dim]; keys: precomputed attention keys; mask [batch, src_len].
      training: passed to the attention.
      drops: optional recurrent dropout masks [batch, units] of GRU1, GRU2, GRU3, ...
        (layers/gru.py), one per sequence and GRU.
      expect: optional [batch] bool, hard attention's rows that take the expected context
        while training (attention.py).

    Returns:
      s_j [batch, units], c_j [batch, mem_dim], alpha_j [batch, src_len] float32, and the hard
      attention log-probability [batch] (zeros for soft attention).
    """
    drops = drops or [None] * self.transition_depth
    s_inter = self.gru1.step(x_proj, s_prev, drops[0])  # s'_j [batch, units]
    context, weights, log_prob = self.attention(s_inter, memory, keys, mask, training=training,
                                                expect=expect)
    s = self.gru2.step(self.gru2.project_inputs(context), s_inter, drops[1])  # [batch, units]
    for cell, drop in zip(self.deep_cells, drops[2:]):
      s = cell.transition(s, drop)  # [batch, units]
    return s, context, weights, log_prob

  def call(self, inputs, states, memory, mask=None, training=False):
    """Keras' cell form with the memory from outside: inputs [batch, in_dim] (E y_{j-1}),
    states [s_{j-1}] ([batch, units]), memory [batch, src_len, mem_dim] and its mask
    [batch, src_len] (None: every position) -> ((s_j, c_j [batch, mem_dim], alpha_j
    [batch, src_len]), [s_j]). The attention computes its keys at each call; a loop over
    the target computes them once with `attention.precompute_keys(memory)` and calls `step`.
    """
    s_prev = states[0] if isinstance(states, (list, tuple)) else states
    # keys None: the attention's own call computes them; mask None: every position.
    s, context, weights, _ = self.step(self.project_inputs(inputs), s_prev, memory, None, mask,
                                       training=training)
    return (s, context, weights), [s]

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "attention": keras.saving.serialize_keras_object(self.attention),
        "layer_norm": self.layer_norm,
        "transition_depth": self.transition_depth,
    }
