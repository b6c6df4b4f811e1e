"""LSTM cell split into a precomputable input projection and a step (Luong et al. 2015).

  [i, f, g, o] = W x + U h_prev + b
  c = sigma(f) (.) c_prev + sigma(i) (.) tanh(g),   h = sigma(o) (.) tanh(c)
Gate order [i, f, c~, o] as in keras.layers.LSTMCell; the forget bias starts at 1.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops


@keras.saving.register_keras_serializable(package="nmt_tf")
class LSTMCell(keras.layers.Layer):
  """LSTM cell with state (h, c); `project_inputs` can run once for all time steps.

  Args:
    units: positive int, the size of h and c.
  """

  def __init__(self, units, kernel_initializer="glorot_uniform",
               recurrent_initializer="orthogonal", **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
    self.state_size = (units, units)

  def build(self, input_shape):
    d = self.units
    self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], 4 * d),
                                  initializer=self.kernel_initializer)
    self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(d, 4 * d),
                                            initializer=self.recurrent_initializer)
    forget_one = lambda shape, dtype=None: tf.concat(
        [tf.zeros([d]), tf.ones([d]), tf.zeros([2 * d])], 0)
    self.bias = self.add_weight(name="bias", shape=(4 * d,), initializer=forget_one)

  def project_inputs(self, x):
    """W x + b for any leading dims: [..., input_dim] -> [..., 4*units]."""
    if not self.built:
      self.build(x.shape)
    return ops.project(x, self.kernel, self.bias)

  def step(self, x_proj, state):
    """One step: x_proj = W x + b [batch, 4*units], state (h, c) each [batch, units] -> (h, c):
    [i, f, g, o] = x_proj + U h_prev,  c = sigma(f) c_prev + sigma(i) tanh(g),
    h = sigma(o) tanh(c)."""
    h_prev, c_prev = state
    gates = x_proj + ops.matmul(h_prev, self.recurrent_kernel)  # [batch, 4*units]
    i, f, g, o = tf.split(gates, 4, axis=-1)  # 4 x [batch, units]
    c = tf.sigmoid(f) * c_prev + tf.sigmoid(i) * tf.tanh(g)
    h = tf.sigmoid(o) * tf.tanh(c)
    return h, c

  def call(self, inputs, states, training=False):
    """One step from raw inputs, in Keras' cell protocol (so `keras.layers.RNN(LSTMCell(d))`
    runs it over a sequence).

    Args:
      inputs: [batch, input_dim], x_t.
      states: [h_prev, c_prev], each [batch, units].
      training: unused.

    Returns:
      (h, [h, c]): the output and the new states, each [batch, units].
    """
    del training
    h, c = self.step(self.project_inputs(inputs), tuple(states))
    return h, [h, c]

  def get_initial_state(self, batch_size=None):
    """[h_0, c_0]: zero states [batch_size, units], in a list as Keras' cells give them."""
    zeros = tf.zeros([batch_size, self.units], self.compute_dtype)
    return [zeros, zeros]

  def get_config(self):
    return {
        **super().get_config(),
        "units": self.units,
        "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
    }
