"""GRU cell with both reset placements, split into a precomputable input part and a step.

docs/EQUATIONS.md, "GRU conventions":
  z = sigma(W_z x + U_z h_prev),  r = sigma(W_r x + U_r h_prev)
  reset_after=False (Cho 2014, Bahdanau 2015): h~ = tanh(W x + U (r (.) h_prev))
  reset_after=True  (dl4mt, Nematus, cuDNN):    h~ = tanh(W x + r (.) (U h_prev))
  h = z (.) h_prev + (1 - z) (.) h~
Gate order in the kernels W and U is [z, r, h~], as in keras.layers.GRUCell.
layer_norm=True (reset-after only; Nematus' layer-normalized GRU, docs/EQUATIONS.md "Layer
normalization"): the input and the state projections are each normalized in two segments,
gates [z ; r] and proposal h~ (ops.segment_norm), then scaled by a learnt gain:
  W x + b  ->  g_x (.) LN(W x) + b,     U h_prev + b_U  ->  g_h (.) LN(U h_prev) + b_U.
Recurrent dropout (variational, Gal and Ghahramani 2016; Nematus' dropout_hidden): with a mask
m [batch, units] drawn once per sequence, the state's projection reads U (m (.) h_prev) at
every step, while the update z (.) h_prev keeps the whole state (reset-after only).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops


@keras.saving.register_keras_serializable(package="nmt_tf")
class GRUCell(keras.layers.Layer):
  """GRU cell whose input projection `W x + b` can be computed once for all time steps.

  `project_inputs(x)` gives `[..., 3*units]`; callers may add further per-step input terms
  (e.g. `C c_t` of RNNsearch) to it before `step(x_proj, h_prev)`.

  Args:
    units: positive int, the state size d.
    reset_after: bool, where the reset gate is applied (see module docstring).
    layer_norm: bool, layer-normalized projections (reset_after only; module docstring).
  """

  def __init__(self, units, reset_after=True, kernel_initializer="glorot_uniform",
               recurrent_initializer="orthogonal", layer_norm=False, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    if layer_norm and not reset_after:
      raise ValueError("Received layer_norm=True with reset_after=False; the layer-normalized "
                       "GRU is the reset-after one (Nematus).")
    self.units = units
    self.reset_after = bool(reset_after)
    self.layer_norm = bool(layer_norm)
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
    self.state_size = units

  def build(self, input_shape):
    """input_shape [..., input_dim]; input_dim 0 builds a GRU without input (a deep
    transition's further step, `transition`): no W, and b is its whole input projection."""
    input_dim = input_shape[-1]
    d = self.units
    if input_dim:
      self.kernel = self.add_weight(name="kernel", shape=(input_dim, 3 * d),
                                    initializer=self.kernel_initializer)
    self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(d, 3 * d),
                                            initializer=self.recurrent_initializer)
    self.bias = self.add_weight(name="bias", shape=(3 * d,), initializer="zeros")
    if self.reset_after:
      # r (.) (U h + b_U): the recurrent bias sits inside the reset product.
      self.recurrent_bias = self.add_weight(name="recurrent_bias", shape=(3 * d,),
                                            initializer="zeros")
    if self.layer_norm and input_dim:
      self.input_gain = self.add_weight(name="input_gain", shape=(3 * d,), initializer="ones")
    if self.layer_norm:
      self.recurrent_gain = self.add_weight(name="recurrent_gain", shape=(3 * d,),
                                            initializer="ones")

  def project_inputs(self, x):
    """W x + b (layer_norm: g_x (.) LN(W x) + b) for any leading dims:
    [..., input_dim] -> [..., 3*units]."""
    if not self.built:
      self.build(x.shape)
    if not self.layer_norm:
      return ops.project(x, self.kernel, self.bias)
    return self.normalize(ops.project(x, self.kernel), self.input_gain, self.bias)

  def normalize(self, a, gain, bias):
    """g (.) LN(a) + b over the gates and proposal segments of a [..., 3*units]."""
    hat, _ = ops.segment_norm(a, self.units)
    return hat * tf.cast(gain, a.dtype) + tf.cast(bias, a.dtype)

  def step(self, x_proj, h_prev, drop=None):
    """One step from a precomputed input projection x = W x_t + b = [x_z, x_r, x_h]:
      reset_after:   [u_z, u_r, u_h] = U (m (.) h_prev) + b_U,  h~ = tanh(x_h + r (.) u_h)
      reset-before:  [u_z, u_r] = U_zr h_prev,          h~ = tanh(x_h + U_h (r (.) h_prev))
      z = sigma(x_z + u_z),  r = sigma(x_r + u_r),  h = z (.) h_prev + (1 - z) (.) h~

    Args:
      x_proj: [batch, 3*units], W x + b (plus any extra input terms).
      h_prev: [batch, units].
      drop: optional recurrent dropout mask m [batch, units] (reset_after only; else m = 1).

    Returns:
      h: [batch, units].
    """
    d = self.units
    if self.reset_after:
      read = h_prev if drop is None else h_prev * tf.cast(drop, h_prev.dtype)
      hu = ops.matmul(read, self.recurrent_kernel)  # U h [batch, 3*units]
      if self.layer_norm:
        hu = self.normalize(hu, self.recurrent_gain, self.recurrent_bias)
      else:
        hu = hu + tf.cast(self.recurrent_bias, h_prev.dtype)  # U h + b_U
      return ops.gru_reset_after(x_proj, hu, h_prev)  # [batch, units]
    if drop is not None:
      raise ValueError("Recurrent dropout needs the reset-after GRU (reset_after=True).")
    # U = [U_zr, U_h]: each part cast and sliced once per forward pass, not at every step.
    hu = ops.matmul(h_prev, self.recurrent_kernel, columns=(0, 2 * d))  # U_zr h [batch, 2*units]
    zr, rh = ops.gru_reset_gates(x_proj, hu, h_prev)  # [z, r] [batch, 2*units], r (.) h
    u_rh = ops.matmul(rh, self.recurrent_kernel, columns=(2 * d, 3 * d))  # U_h (r (.) h)
    return ops.gru_update(x_proj, u_rh, h_prev, zr)  # [batch, units]

  def transition(self, h_prev, drop=None):
    """One step of a GRU without input (built with input_dim 0): `step` from x = b."""
    x = tf.broadcast_to(tf.cast(self.bias, h_prev.dtype), [tf.shape(h_prev)[0], 3 * self.units])
    return self.step(x, h_prev, drop)  # [batch, units]

  def call(self, inputs, states, training=False):
    """One step from raw inputs, in Keras' cell protocol (so `keras.layers.RNN(GRUCell(d))`
    runs it over a sequence).

    Args:
      inputs: [batch, input_dim], x_t.
      states: [h_prev] (keras.layers.RNN passes a list) or h_prev, [batch, units].
      training: unused (recurrent dropout is `step`'s `drop`).

    Returns:
      (h, [h]): the output and the new states, h [batch, units].
    """
    del training
    h_prev = states[0] if isinstance(states, (list, tuple)) else states
    h = self.step(self.project_inputs(inputs), h_prev)
    return h, [h]

  def get_initial_state(self, batch_size=None):
    """[h_0]: the zero state [batch_size, units], in a list as Keras' cells give it."""
    return [tf.zeros([batch_size, self.units], self.compute_dtype)]

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "reset_after": self.reset_after,
        "layer_norm": self.layer_norm,
        "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
    }

