"""What a train step minimises, as objects that own their state: `CrossEntropy` and, for hard
attention, `Reinforce` (docs/EQUATIONS.md, "Training objective" and "Hard attention: the
REINFORCE estimate").

The train step (train_step.py) asks its objective, in this order:
  samples                      rows per sentence (the batch is repeated that many times)
  step_inputs()                tensors read once per step before the replicas run
  model_arguments(optimizer)   extra keyword arguments of the model's training call
  loss(outputs, batch, N, S, inputs)
                               a `Loss`, on one replica: N the global batch's target tokens,
                               S its sentences
  apply_head(context, grads)   updates the objective's own trainable variables (head_variables)
  after_step(out, inputs)      updates its moving averages from the step's reduced sums
and the trainer asks `state()` for what the checkpoints hold ({name: trackable}; `optional`
names what a checkpoint written before an option was turned on may lack) and `summary(out)`
for the scalars of its TensorBoard section.
"""

import dataclasses
from typing import Dict

import keras
import tensorflow as tf

from nmt_tf.training import losses
from nmt_tf.training import reinforce

SUM = tf.distribute.ReduceOp.SUM


@dataclasses.dataclass
class Loss:
  """One replica's loss.

  Attributes:
    loss_sum: the token loss summed over the batch (a mean over the samples of a sentence).
    total: what the model's variables minimise: the token loss over the global batch's
      tokens, plus the objective's other terms.
    fit: what the objective's own head variables minimise (0 without them).
    terms: {name: scalar} of the model's terms, whose gradients the diagnosing step measures
      on the attention's weights (empty: no diagnostics).
    stats: float32 sums over the batch, reduced over replicas into the step's output.
  """

  loss_sum: tf.Tensor
  total: tf.Tensor
  fit: tf.Tensor
  terms: Dict[str, tf.Tensor]
  stats: Dict[str, tf.Tensor]


class CrossEntropy:
  """L = sum_{(y, t)} CE(y_t) / N over the global batch's N target tokens, with label
  smoothing epsilon (losses.token_loss_sum).

  Args:
    label_smoothing: epsilon (train.label_smoothing).
    smoothing_labels: the form of the smoothed loss, "sparse" or "dense" (the same values;
      bench/bench_train.py compares their speed).
  """

  samples = 1
  diagnoses = False  # whether loss() gives terms worth a diagnosing step
  optional = ()

  def __init__(self, label_smoothing=0.0, smoothing_labels="sparse"):
    losses.check_smoothing_labels(smoothing_labels)
    self.label_smoothing = label_smoothing
    self.smoothing_labels = smoothing_labels

  def state(self):
    """{name: trackable} of the objective's state, checkpointed with the run's."""
    return {}

  @property
  def head_variables(self):
    return []

  def step_inputs(self):
    return ()

  def model_arguments(self, optimizer):  # pylint: disable=unused-argument
    """Extra keyword arguments of the model's training call (the optimizer counts steps)."""
    return {}

  def token_loss(self, outputs, batch, global_tokens):
    """(loss_sum, loss_sum / global_tokens) of the batch."""
    loss_sum, _ = losses.token_loss_sum(outputs["logits"], batch["target_out"],
                                        self.label_smoothing, self.smoothing_labels)
    loss_sum = loss_sum / self.samples  # the mean over the samples of each sentence
    return loss_sum, loss_sum / global_tokens

  def loss(self, outputs, batch, global_tokens, global_sentences,  # pylint: disable=unused-argument
           inputs):
    loss_sum, likelihood = self.token_loss(outputs, batch, global_tokens)
    return Loss(loss_sum, likelihood, tf.constant(0.0), {}, {})

  def apply_head(self, context, grads):
    """Applies the (replica) gradients of head_variables; nothing without a head."""

  def after_step(self, out, inputs):  # pylint: disable=unused-argument
    """The step's output, after the objective's updates (cross-replica context)."""
    return out

  def summary(self, out):  # pylint: disable=unused-argument
    """{name: scalar} of the objective for TensorBoard, or {}."""
    return {}


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
