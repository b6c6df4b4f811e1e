"""Adam (Kingma & Ba 2015, Algorithm 1 with the "epsilon hat" form) as one fused kernel per
variable.

  m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
  theta <- theta - lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)

keras.optimizers.Adam computes this with about ten separate elementwise ops per variable, each
a pass over memory with a temporary; TensorFlow's `ResourceApplyAdam` kernel does the same
update in one multithreaded pass: same formula, same variables (checkpoints of either
optimizer restore into the other), same results up to float rounding. Used for every
precision; what it gains is the `FusedAdam` row of docs/PERFORMANCE.md, "Design choices,
measured".
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="nmt_tf")
class FusedAdam(keras.optimizers.Adam):
  """keras.optimizers.Adam whose update is TensorFlow's fused ApplyAdam kernel (TensorFlow
  backend; `amsgrad=True` falls back to Keras' own ops). A sparse (embedding) gradient is
  applied as its dense equivalent: the moments of every row decay, as in dense Adam (TrainStep
  densifies every gradient anyway; keras' Adam would update only the rows present)."""

  def update_step(self, gradient, variable, learning_rate):
    if self.amsgrad:
      return super().update_step(gradient, variable, learning_rate)
    var = variable.value if isinstance(variable, keras.Variable) else variable
    index = self._get_variable_index(variable)
    m, v = self._momentums[index].value, self._velocities[index].value
    dtype = var.dtype
    step = tf.cast(self.iterations + 1, dtype)
    beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    tf.raw_ops.ResourceApplyAdam(
        var=var.handle, m=m.handle, v=v.handle, beta1_power=tf.pow(beta_1, step),
        beta2_power=tf.pow(beta_2, step), lr=tf.cast(learning_rate, dtype), beta1=beta_1,
        beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype),
        grad=tf.cast(tf.convert_to_tensor(gradient), dtype), use_locking=False)
    return None
