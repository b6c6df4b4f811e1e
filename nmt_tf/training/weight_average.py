"""An exponential moving average of the weights for validation and best/ (Polyak and Juditsky
1992): Marian's --exponential-smoothing, OpenNMT-tf's moving_average_decay.

After every update t of the weights theta (t = 1, 2, ...):

  theta_bar_t = d_t theta_bar_{t-1} + (1 - d_t) theta_t,   d_t = min(d, (t - 1) / (t + 9))

with d = `train.moving_average_decay` (0: off). d_1 = 0 makes theta_bar_1 = theta_1, so the
average never holds the weights it was created with, and a run resumed from a checkpoint that
has no average starts one from the restored weights. While (t - 1) / (t + 9) < d, for the
first 10 d / (1 - d) updates or so, the average spans about the last tenth of the updates
(1 / (1 - d_t) = (t + 9) / 10) and follows the fast-moving early weights; then it spans about
1 / (1 - d) updates (as TensorFlow's ExponentialMovingAverage with num_updates).

Training updates theta and is not changed by it; validation, early stopping and the best/
model use theta_bar, so evaluate, translate and export read the averaged model from best/.
The training checkpoints keep both.
"""

import contextlib

import tensorflow as tf


class WeightAverage(tf.Module):
  """The moving average theta_bar of `variables` (see the module docstring).

  Create it under the strategy's scope, so that its variables are mirrored like the model's,
  and checkpoint it with the training state.

  Args:
    variables: the trainable variables theta.
    decay: d, in (0, 1).
  """

  def __init__(self, variables, decay, name="weight_average"):
    super().__init__(name=name)
    if not 0.0 < decay < 1.0:
      raise ValueError(f"Received decay={decay!r}; expected a number in (0, 1).")
    self.decay = float(decay)
    self._variables = list(variables)
    with self.name_scope:
      self.averages = [tf.Variable(v, trainable=False, name=f"average_{i}")
                       for i, v in enumerate(self._variables)]
      self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")

  def update(self):
    """theta_bar_t from theta_t, after the optimizer's update t (in a tf.function or eagerly,
    in the cross-replica context)."""
    t = tf.cast(self.updates + 1, tf.float32)
    d = tf.minimum(tf.constant(self.decay, tf.float32), (t - 1.0) / (t + 9.0))
    for average, variable in zip(self.averages, self._variables):
      average.assign(d * average + (1.0 - d) * tf.cast(variable, average.dtype))
    self.updates.assign_add(1)

  @contextlib.contextmanager
  def applied(self):
    """Within the block the variables hold theta_bar; theta is put back afterwards. Before
    the first update the variables keep theta."""
    if int(self.updates.numpy()) == 0:
      yield
      return
    weights = [tf.identity(tf.convert_to_tensor(v)) for v in self._variables]
    for variable, average in zip(self._variables, self.averages):
      variable.assign(average)
    try:
      yield
    finally:
      for variable, value in zip(self._variables, weights):
        variable.assign(value)
