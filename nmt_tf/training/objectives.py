"""What a train step minimises: the token cross-entropy (`CrossEntropy`, in
nmt_tf/models/objective.py with the protocol every objective follows, since `Seq2Seq.fit`
minimises it too) and, for hard attention, `Reinforce` (docs/EQUATIONS.md, "Training
objective" and "Hard attention: the REINFORCE estimate"); `build` picks one for a config.
"""

import keras
import tensorflow as tf

from nmt_tf.models import losses
from nmt_tf.models.objective import CrossEntropy, Loss
from nmt_tf.training import reinforce

SUM = tf.distribute.ReduceOp.SUM


class Reinforce(CrossEntropy):
  """The cross-entropy plus hard attention's REINFORCE and entropy terms (reinforce.py), with
  their state: the moving-average baseline b and its step count, sigma^2 of the reward
  (`normalize`), and the learned baseline's head and optimizer (`baseline="learned"`).

  The terms are means over the replica's rows, weighed by its share S_r / S of the global
  batch's sentences; after each step b <- d b + (1 - d) mean reward, and sigma^2 alike.

  Args:
    config: ReinforceConfig.
    label_smoothing, smoothing_labels: as CrossEntropy.
    expectation_rate: model.hard_expectation_rate, in effect from `config.start` on.
    state_units: the size of the decision states (model.decoder_units).
    learning_rate: the learned baseline's Adam learning rate.
  Create it under the distribution strategy's scope: it makes variables.
  """

  diagnoses = True

  def __init__(self, config, label_smoothing=0.0, smoothing_labels="sparse",
               expectation_rate=0.0, state_units=1, learning_rate=1e-3):
    super().__init__(label_smoothing, smoothing_labels)
    self.config = config
    self.samples = config.samples
    self.expectation_rate = expectation_rate
    self.baseline = tf.Variable(0.0, trainable=False, name="reinforce_baseline")
    self.baseline_steps = tf.Variable(0.0, trainable=False, name="reinforce_baseline_steps")
    self.reward_variance = self.head = self.head_optimizer = None
    if config.normalize:
      self.reward_variance = tf.Variable(0.0, trainable=False, name="reward_variance")
    if config.baseline_kind() == "learned":
      self.head = reinforce.LearnedBaseline(name="reinforce_baseline_head")
      self.head(tf.zeros([1, 1, state_units]))
      self.head_optimizer = keras.optimizers.Adam(learning_rate)
      self.head_optimizer.build(self.head.trainable_variables)
    self.optional = tuple(name for name, present in (
        ("reward_variance", self.reward_variance is not None),
        ("reinforce_baseline_head", self.head is not None),
        ("reinforce_baseline_optimizer", self.head is not None)) if present)

  def state(self):
    # The names are those of the checkpoints of every earlier run.
    objects = {"reinforce_baseline": self.baseline,
               "reinforce_baseline_steps": self.baseline_steps}
    if self.reward_variance is not None:
      objects["reward_variance"] = self.reward_variance
    if self.head is not None:
      objects["reinforce_baseline_head"] = self.head
      objects["reinforce_baseline_optimizer"] = self.head_optimizer
    return objects

  @property
  def head_variables(self):
    return list(self.head.trainable_variables) if self.head is not None else []

  def step_inputs(self):
    """(b, max(1, sigma)): the baseline and the reward's scale of this step."""
    scale = tf.constant(1.0) if self.reward_variance is None else tf.maximum(
        1.0, tf.sqrt(self.reward_variance.read_value()))
    return self.baseline.read_value(), scale

  def model_arguments(self, optimizer):
    if not self.config.start:
      return {}
    # Before the first sampling step every sentence takes the expected context (no sample).
    return {"expectation_rate": tf.where(optimizer.iterations < self.config.start, 1.0,
                                         self.expectation_rate)}

  def loss(self, outputs, batch, global_tokens, global_sentences, inputs):
    baseline, scale = inputs
    loss_sum, likelihood = self.token_loss(outputs, batch, global_tokens)
    parts, stats = reinforce.terms(self.config, outputs, batch["target_out"], baseline, scale,
                                   self.samples, self.head)
    rows = tf.cast(tf.shape(batch["target_out"])[0], tf.float32)
    share = rows / self.samples / global_sentences
    parts = {key: value * share for key, value in parts.items()}
    total = likelihood + parts["reinforce"] + parts["entropy"]
    terms = {"likelihood": likelihood, "reinforce": parts["reinforce"],
             "entropy": parts["entropy"]}
    return Loss(loss_sum, total, parts["baseline_fit"], terms, stats)

  def apply_head(self, context, grads):
    if self.head is not None:
      self.head_optimizer.apply(context.all_reduce(SUM, grads), self.head_variables)

  def after_step(self, out, inputs):
    _, scale = inputs
    first = self.baseline_steps <= 0
    decay = self.config.baseline_decay
    average = lambda old, value: tf.where(first, value, decay * old + (1.0 - decay) * value)
    mean_reward = out["reward_sum"] / tf.maximum(out["sentences"], 1.0)
    self.baseline.assign(average(self.baseline, mean_reward))
    if self.reward_variance is not None:
      out["reward_scale"] = scale
      self.reward_variance.assign(average(
          self.reward_variance, out["raw_sq_sum"] / tf.maximum(out["decisions"], 1.0)))
    self.baseline_steps.assign_add(1.0)
    out["baseline"] = self.baseline.read_value()
    return out

  def summary(self, out):
    return reinforce.summary(out)


def build(config, smoothing_labels="sparse"):
  """The objective of an ExperimentConfig: Reinforce for hard attention, else CrossEntropy."""
  if config.model.attention_mode != "hard":
    return CrossEntropy(config.train.label_smoothing, smoothing_labels)
  return Reinforce(config.reinforce, config.train.label_smoothing, smoothing_labels,
                   expectation_rate=config.model.hard_expectation_rate,
                   state_units=config.model.decoder_units,
                   learning_rate=config.train.learning_rate)
