"""The weights the hand-written sequence loops take, one typed structure per cell and score.

Each structure is read from the layers that own the weights by the functions at the end
(`gru_weights`, `cgru_weights`, ...; they read the layers' variables by name and import no
layer), with the kernels already in the product dtype (precision.py `weight`), so a loop never
casts inside its steps. They are NamedTuples: a missing or misspelt field is an error where
the structure is built, and tf.nest flattens them for tf.custom_gradient, which returns the
gradients in the same structure. A field that a configuration does not use is None.
"""

from typing import NamedTuple, Optional

import tensorflow as tf

from nmt_tf.layers.kernels.precision import weight


class GRUWeights(NamedTuple):
  """The recurrent half of a GRU (docs/EQUATIONS.md "GRU conventions").

  kernel: U [units, 3*units], gate order [z, r, h~].
  bias: b_U [3*units] of a reset-after GRU (inside the reset product); None for reset-before.
  gain: g [3*units] of a layer-normalized GRU, whose state projection is g (.) a^ + b_U with
    a^ = U h normalized per segment (layer_norm.py); None without layer normalization.
  """
  kernel: tf.Tensor
  bias: Optional[tf.Tensor] = None
  gain: Optional[tf.Tensor] = None


class AdditiveWeights(NamedTuple):
  """The per-step half of an additive score e_i = v^T tanh(k_i + W q): the keys k_i are
  precomputed once per sentence.

  query_kernel: W [query_dim, units].
  v: [units].
  """
  query_kernel: tf.Tensor
  v: tf.Tensor


class StateMemoryWeights(NamedTuple):
  """The memory RNN's attention over the previous decoder states (Werlen et al. 2018, A.3.2):
  keys m_i = W_m s_i + b_m written when s_i is made, the score of the query W_s s_{j-1}.

  key_kernel: W_m [units, mem_units]; key_bias: b_m [mem_units];
  score: W_s [units, mem_units] and v [mem_units].
  """
  key_kernel: tf.Tensor
  key_bias: tf.Tensor
  score: AdditiveWeights


class TransitionWeights(NamedTuple):
  """A GRU transition without input (a deep transition's further step, Miceli Barone et al.
  2017): h = GRU(b, h_prev), its input projection being the bias b alone.

  bias: b [3*units].
  gru: the recurrent weights (reset-after).
  """
  bias: tf.Tensor
  gru: GRUWeights


class CGRUWeights(NamedTuple):
  """The conditional GRU (docs/EQUATIONS.md "cgru"): GRU1, the attention queried with s'_j,
  GRU2 reading the context c_j, optionally further transitions after GRU2 (a deep
  transition), and optionally the state memory feeding GRU1.

  gru1: GRU1's recurrent weights (reset-after).
  attention: the additive score's W_a and v.
  context_kernel: GRU2's input kernel W2 [mem_dim, 3*units]; context_bias: its b2 [3*units].
  gru2: GRU2's recurrent weights (reset-after).
  state_memory: StateMemoryWeights of the memory RNN, else None.
  context_gain: with layer normalization, the gain g2 [3*units] of GRU2's input
    g2 (.) a^ + b2, a^ = W2 c_j normalized per segment; else None.
  transitions: TransitionWeights of the GRUs after GRU2, in order (empty for the cGRU).
  """
  gru1: GRUWeights
  attention: AdditiveWeights
  context_kernel: tf.Tensor
  context_bias: tf.Tensor
  gru2: GRUWeights
  state_memory: Optional[StateMemoryWeights] = None
  context_gain: Optional[tf.Tensor] = None
  transitions: tuple = ()  # TransitionWeights of GRU3, GRU4, ...


class RNNSearchWeights(NamedTuple):
  """The RNNsearch decoder (docs/EQUATIONS.md "rnnsearch"): the attention queried with
  s_{j-1}, then one GRU reading [E y_{j-1} ; c_j].

  attention: the additive score's W_a and v.
  context_kernel: C [mem_dim, 3*units], the context's part of the GRU's input kernel.
  gru: the GRU's recurrent weights (bias None for the reset-before GRU of the paper).
  """
  attention: AdditiveWeights
  context_kernel: tf.Tensor
  gru: GRUWeights


class LuongWeights(NamedTuple):
  """Luong et al. 2015's input-feeding decoder (docs/EQUATIONS.md "luong").

  feed_kernel: W_f [units, 3*units], the input feeding h~_{j-1}.
  gru: the GRU's recurrent weights (reset-after).
  combine_kernel: W_c [mem_dim + units, units] of h~_j = tanh(W_c [c_j ; s_j]).
  """
  feed_kernel: tf.Tensor
  gru: GRUWeights
  combine_kernel: tf.Tensor


def flatten(weights):
  """The tensors of a weight structure, without its None fields (tf.custom_gradient takes
  tensors only)."""
  return [t for t in tf.nest.flatten(weights) if t is not None]


def unflatten(weights, tensors):
  """The structure of `weights` holding `tensors` (as `flatten` lists them) and None where
  `weights` has None."""
  tensors = iter(tensors)
  return tf.nest.pack_sequence_as(
      weights, [None if t is None else next(tensors) for t in tf.nest.flatten(weights)])


def _built(layer, input_dim):
  """A Dense layer or GRUCell, built for `input_dim` inputs if it was not yet."""
  if not layer.built:
    layer.build((None, input_dim))
  return layer


def gru_weights(cell, dtype):
  """GRUWeights of a GRUCell (layers/gru.py) over `dtype` states: U in the product dtype, b_U
  (None for reset-before) and g_h (None without layer norm)."""
  bias = tf.convert_to_tensor(cell.recurrent_bias) if cell.reset_after else None
  gain = tf.convert_to_tensor(cell.recurrent_gain) if cell.layer_norm else None
  return GRUWeights(weight(cell.recurrent_kernel, dtype), bias, gain)


def additive_weights(score_layer, query_dim, dtype):
  """AdditiveWeights of a layer scoring v^T tanh(k_i + W q) with its Dense `query_dense` (W)
  and `v`: BahdanauAttention, StateMemory."""
  if not score_layer.built:
    score_layer.build()
  query_dense = _built(score_layer.query_dense, query_dim)
  return AdditiveWeights(weight(query_dense.kernel, dtype), tf.convert_to_tensor(score_layer.v))


def state_memory_weights(state_memory, units, dtype):
  """StateMemoryWeights of a StateMemory layer (layers/self_attention.py) over `dtype`
  states of `units` dims."""
  key_dense = _built(state_memory.key_dense, units)
  return StateMemoryWeights(weight(key_dense.kernel, dtype),
                            tf.convert_to_tensor(key_dense.bias),
                            additive_weights(state_memory, units, dtype))


def cgru_weights(cell, memory_dim, dtype, state_memory=None):
  """CGRUWeights of a ConditionalGRUCell (layers/conditional_gru.py) over `dtype` states and
  annotations of `memory_dim` dims; with a StateMemory layer, its weights too."""
  gru2 = _built(cell.gru2, memory_dim)
  return CGRUWeights(
      gru1=gru_weights(cell.gru1, dtype),
      attention=additive_weights(cell.attention, cell.units, dtype),
      context_kernel=weight(gru2.kernel, dtype),
      context_bias=tf.convert_to_tensor(gru2.bias),
      gru2=gru_weights(gru2, dtype),
      state_memory=(None if state_memory is None
                    else state_memory_weights(state_memory, cell.units, dtype)),
      context_gain=tf.convert_to_tensor(gru2.input_gain) if cell.layer_norm else None,
      transitions=tuple(TransitionWeights(tf.convert_to_tensor(deep.bias),
                                          gru_weights(deep, dtype))
                        for deep in cell.deep_cells))


def rnnsearch_weights(attention, context_proj, gru, memory_dim, dtype):
  """RNNSearchWeights of the RNNsearch decoder's layers: its BahdanauAttention, the Dense C
  of the context and its GRUCell."""
  return RNNSearchWeights(additive_weights(attention, gru.units, dtype),
                          weight(_built(context_proj, memory_dim).kernel, dtype),
                          gru_weights(gru, dtype))


def luong_weights(feed_proj, gru, combine, memory_dim, dtype):
  """LuongWeights of the input-feeding decoder's layers: the Dense W_f, its GRUCell and the
  Dense W_c."""
  units = gru.units
  return LuongWeights(weight(_built(feed_proj, units).kernel, dtype), gru_weights(gru, dtype),
                      weight(_built(combine, memory_dim + units).kernel, dtype))
