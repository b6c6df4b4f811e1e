"""Learning-rate schedules of `train.schedule`, each after a linear warm-up.

With peak rate lr, warm-up W and step s (counted from 1):
  warm-up (s <= W):  lr * s / W
  constant:          lr
  inverse_sqrt:      lr * sqrt(max(W, 1) / s)
  noam:              lr * min(s / W, sqrt(W / s))   (Vaswani et al. 2017, sec. 5.3, peak lr)
  exponential:       lr * decay_rate ^ ((s - W) / decay_steps)
times a scale k, 1 unless the run decays on plateaus (`train.plateau_factor` = f; Joey NMT's
"plateau" scheduling): k = f^n after n decays, one at every plateau_patience-th validation
without a BLEU gain since the last gain (trainer.py); k is kept in the checkpoint.
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="nmt_tf")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The schedule of one TrainConfig (see module docstring).

  Args:
    learning_rate: peak rate lr > 0.
    schedule: constant | inverse_sqrt | noam | exponential.
    warmup_steps: W >= 0 (0 = no warm-up).
    decay_rate, decay_steps: the exponential schedule's parameters.
    scale: k, a float32 scalar variable the rate is multiplied by (None: 1). State, not
      config: the trainer checkpoints it.
  """

  def __init__(self, learning_rate, schedule="constant", warmup_steps=0, decay_rate=0.5,
               decay_steps=10000, scale=None):
    if schedule not in ("constant", "inverse_sqrt", "noam", "exponential"):
      raise ValueError(f"Received schedule={schedule!r}; expected constant, inverse_sqrt, "
                       "noam or exponential.")
    self.learning_rate = float(learning_rate)
    self.schedule = schedule
    self.warmup_steps = int(warmup_steps)
    self.decay_rate = float(decay_rate)
    self.decay_steps = int(decay_steps)
    self.scale = scale

  def __call__(self, step):
    rate = self._unscaled(step)
    return rate if self.scale is None else rate * self.scale

  def _unscaled(self, step):
    # Keras passes the number of updates already applied; the schedule counts from 1.
    s = tf.cast(step, tf.float32) + 1.0
    lr = tf.constant(self.learning_rate, tf.float32)
    w = tf.constant(float(max(self.warmup_steps, 1)), tf.float32)
    if self.schedule == "constant":
      after = lr
    elif self.schedule == "inverse_sqrt" or self.schedule == "noam":
      after = lr * tf.sqrt(w / tf.maximum(s, w))
    else:
      after = lr * tf.pow(self.decay_rate, tf.maximum(s - float(self.warmup_steps), 0.0) /
                          float(self.decay_steps))
    if self.warmup_steps == 0:
      return after
    return tf.where(s <= w, lr * s / w, after)

  def get_config(self):
    return {"learning_rate": self.learning_rate, "schedule": self.schedule,
            "warmup_steps": self.warmup_steps, "decay_rate": self.decay_rate,
            "decay_steps": self.decay_steps}


def learning_rate_schedule(train_config, scale=None):
  """The WarmupSchedule of a TrainConfig, times `scale` (see WarmupSchedule)."""
  return WarmupSchedule(train_config.learning_rate, train_config.schedule,
                        train_config.warmup_steps, train_config.decay_rate,
                        train_config.decay_steps, scale)
