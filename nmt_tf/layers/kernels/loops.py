"""How a model part runs its recurrences over a sequence: one graph-mode loop over `step`.

An encoder or decoder holds one TrainingLoops (`loops`), resolved from the model's
KernelOptions and precision where the model is built (Seq2Seq). Its layers state their
equations in `step`; every pass, training or not, runs that step in `scan` (scan.py), and
training takes TensorFlow's gradient of the loop, with the gradients of loop-invariant
products deferred to after the loop when the choice says so (deferred.py).
"""

from nmt_tf.layers.kernels.options import DEFAULT_CHOICE
from nmt_tf.layers.kernels.scan import scan_time


class TrainingLoops:
  """The loops of one model part (module docstring).

  Args:
    choice: options.KernelChoice, resolved once for the part.
  """

  def __init__(self, choice=DEFAULT_CHOICE):
    self.choice = choice

  def scan(self, step, inputs, initial_state):
    """scan.scan_time(step, inputs, initial_state) with the choice's deferred gradients:
    (outputs [batch, time, ...], final state)."""
    return scan_time(step, inputs, initial_state, defer=self.choice.defer_gradients)


DEFAULT_LOOPS = TrainingLoops()
