"""The weights the hand-written sequence loops take, one typed structure per cell and score.

Each structure is built by the layer that owns the weights (`GRUCell.loop_weights`,
`BahdanauAttention.loop_weights`, `StateMemory.loop_weights`, and the decoders for their whole
loop), with the kernels already in the product dtype (precision.py `weight`), so a loop never
casts inside its steps. They are NamedTuples: a missing or misspelt field is an error where
the structure is built, and tf.nest flattens them for tf.custom_gradient, which returns the
gradients in the same structure. A field that a configuration does not use is None.
"""

from typing import NamedTuple, Optional

import tensorflow as tf


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
