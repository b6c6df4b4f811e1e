"""Divergence watch: a loud warning when the training loss explodes but stays finite.

A learning rate far too high makes the loss jump to 1e3-1e7 without ever becoming NaN, and the
run would finish "successfully". The watch follows an exponential moving average of the loss,
m_t = (1 - a) m_{t-1} + a loss_t (a = 0.1), and a reference: its minimum over the run, at most
`initial_loss` (log V, the cross-entropy of a uniform prediction over V target words, so that
a loss that explodes from the first step is caught too). When m_t stays above `factor` times
the reference (and at least `margin` nats above it) for `patience` consecutive steps, it
reports once, and again only after the loss has come back.
"""

import math


class DivergenceWatch:
  """Watches the training loss (see module docstring).

  Args:
    initial_loss: the highest reference (log V); None: the run's minimum alone.
    factor: how many times the smoothed minimum counts as exploded.
    patience: consecutive steps above the threshold before warning.
    margin: the smoothed loss must also exceed the minimum by this many nats (a loss near 0
      may double without diverging).
    warmup: steps before the minimum is tracked (the first losses are noisy).
  """

  def __init__(self, initial_loss=None, factor=10.0, patience=20, margin=1.0, warmup=10):
    self.factor, self.patience, self.margin, self.warmup = factor, patience, margin, warmup
    self.smoothed = None
    self.minimum = math.inf if initial_loss is None else float(initial_loss)
    self.minimum_step = None if initial_loss is None else 0
    self._seen = 0
    self._above = 0
    self._warned = False

  def update(self, step, loss):
    """Feeds the loss of `step`; returns a one-line warning when divergence starts, else None.
    """
    self.smoothed = loss if self.smoothed is None else 0.9 * self.smoothed + 0.1 * loss
    self._seen += 1
    if self._seen > self.warmup and self.smoothed < self.minimum:
      self.minimum, self.minimum_step = self.smoothed, step
    if self.minimum_step is None:
      return None
    exploded = (self.smoothed > self.factor * self.minimum
                and self.smoothed > self.minimum + self.margin)
    self._above = self._above + 1 if exploded else 0
    if not exploded:
      self._warned = False
      return None
    if self._above < self.patience or self._warned:
      return None
    self._warned = True
    where = (f"its minimum {self.minimum:.4g} at step {self.minimum_step}" if self.minimum_step
             else f"the loss of a uniform prediction, {self.minimum:.4g}")
    return (f"WARNING: the training loss is diverging: {self.smoothed:.4g} (moving average) at "
            f"step {step}, {self.smoothed / self.minimum:.0f}x {where}; lower "
            "train.learning_rate, raise "
            "train.warmup_steps or set train.clip_norm, and train again in a new --run_dir.")
