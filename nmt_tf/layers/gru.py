"""GRU cell with both reset placements, split into a precomputable input part and a step.

docs/EQUATIONS.md, "GRU conventions":
  z = sigma(W_z x + U_z h_prev),  r = sigma(W_r x + U_r h_prev)
  reset_after=False (Cho 2014, Bahdanau 2015): h~ = tanh(W x + U (r (.) h_prev))
  reset_after=True  (dl4mt, Nematus, cuDNN):    h~ = tanh(W x + r (.) (U h_prev))
  h = z (.) h_prev + (1 - z) (.) h~
Gate order in the fused kernels is [z, r, h~], as in keras.layers.GRUCell.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import deferred
from nmt_tf.layers import ops
from nmt_tf.layers import precision


@keras.saving.register_keras_serializable(package="nmt_tf")
class GRUCell(keras.layers.Layer):
  """GRU cell whose input projection `W x + b` can be computed once for all time steps.

  `project_inputs(x)` gives `[..., 3*units]`; callers may add further per-step input terms
  (e.g. `C c_t` of RNNsearch) to it before `step(x_proj, h_prev)`.

  Args:
    units: positive int, the state size d.
    reset_after: bool, where the reset gate is applied (see module docstring).
  """

  def __init__(self, units, reset_after=True, kernel_initializer="glorot_uniform",
               recurrent_initializer="orthogonal", **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    self.reset_after = bool(reset_after)
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
    self.state_size = units

  def build(self, input_shape):
    input_dim = input_shape[-1]
    d = self.units
    self.kernel = self.add_weight(name="kernel", shape=(input_dim, 3 * d),
                                  initializer=self.kernel_initializer)
    self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(d, 3 * d),
                                            initializer=self.recurrent_initializer)
    self.bias = self.add_weight(name="bias", shape=(3 * d,), initializer="zeros")
    if self.reset_after:
      # r (.) (U h + b_U): the recurrent bias sits inside the reset product.
      self.recurrent_bias = self.add_weight(name="recurrent_bias", shape=(3 * d,),
                                            initializer="zeros")

  def project_inputs(self, x):
    """W x + b for any leading dims: [..., input_dim] -> [..., 3*units]."""
    if not self.built:
      self.build(x.shape)
    return ops.project(x, self.kernel, self.bias)

  def step(self, x_proj, h_prev):
    """One step from a precomputed input projection.

    Args:
      x_proj: [batch, 3*units], W x + b (plus any extra input terms).
      h_prev: [batch, units].

    Returns:
      h: [batch, units].
    """
    d = self.units
    x_z, x_r, x_h = tf.split(x_proj, 3, axis=-1)  # 3 x [batch, units]
    if self.reset_after:
      u = precision.weight(self.recurrent_kernel, h_prev.dtype)  # cast once per forward pass
      hu = deferred.matmul(h_prev, u) + tf.cast(self.recurrent_bias, h_prev.dtype)  # [batch, 3*units]
      h_z, h_r, h_h = tf.split(hu, 3, axis=-1)
      z = tf.sigmoid(x_z + h_z)
      r = tf.sigmoid(x_r + h_r)
      h_tilde = tf.tanh(x_h + r * h_h)
    else:
      # U_zr and U_h: cast and sliced once per forward pass, not copied at every step.
      u_zr = precision.weight(self.recurrent_kernel, h_prev.dtype, (0, 2 * d))  # [units, 2*units]
      u_h = precision.weight(self.recurrent_kernel, h_prev.dtype, (2 * d, 3 * d))  # [units, units]
      hu = deferred.matmul(h_prev, u_zr)  # [batch, 2*units]
      h_z, h_r = tf.split(hu, 2, axis=-1)
      z = tf.sigmoid(x_z + h_z)
      r = tf.sigmoid(x_r + h_r)
      h_tilde = tf.tanh(x_h + deferred.matmul(r * h_prev, u_h))
    return z * h_prev + (1.0 - z) * h_tilde  # [batch, units]

  def call(self, x, h_prev):
    """One step from raw inputs: x [batch, input_dim], h_prev [batch, units] -> [batch, units]."""
    return self.step(self.project_inputs(x), h_prev)

  def get_initial_state(self, batch_size):
    return tf.zeros([batch_size, self.units], self.compute_dtype)

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "reset_after": self.reset_after,
        "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
    }
