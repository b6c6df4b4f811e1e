"""The training loop's own state, checkpointed with the model: `RunState`.

  step, epoch, batch_in_epoch  where the run is (the data order resumes from them)
  bad_evals, best_bleu         validations without a BLEU gain, the run's best BLEU
  train_seconds, cpu_seconds   wall-clock and CPU seconds of training over every invocation
                               (CPU seconds show what a VM's stolen time took from a budget)
  data_position                every worker's position in a streamed split (JSON,
                               data_order.py)
"""

import tensorflow as tf

COUNTERS = ("step", "epoch", "batch_in_epoch", "bad_evals")


class RunState:
  """The variables of the module docstring, by name.

  Args:
    data_position: the tf.string variable of the position, made outside the distribution
      strategy's scope (collectives cannot broadcast a string); the others are made here,
      inside it.
  """

  def __init__(self, data_position):
    self.variables = {name: tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
                      for name in COUNTERS}
    self.variables["best_bleu"] = tf.Variable(-1.0, trainable=False, name="best_bleu")
    for name in ("train_seconds", "cpu_seconds"):
      self.variables[name] = tf.Variable(0.0, dtype=tf.float64, trainable=False, name=name)
    self.variables["data_position"] = data_position

  def __getitem__(self, name):
    return self.variables[name]

  def read(self, name):
    """The host value of `name`: int, float or str."""
    value = self.variables[name].read_value().numpy()
    if name == "data_position":
      return value.decode("utf-8")
    return int(value) if name in COUNTERS else float(value)

  def objects(self):
    """{name: variable}, the names of the run's checkpoints."""
    return dict(self.variables)
