"""What a train step minimises, as objects that own their state: the token cross-entropy
(`CrossEntropy`, and `Loss`, what an objective's `loss` returns) and the protocol that every
objective follows (docs/EQUATIONS.md, "Training objective"). Hard attention's REINFORCE
objective (nmt_tf/training/objectives.py) extends it.

The training step (update.py: `Seq2Seq.train_step` and the trainer's distributed step) asks
its objective, in this order:
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

import tensorflow as tf

from nmt_tf.models import losses


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
