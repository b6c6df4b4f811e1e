"""The duties of the training loop, each an object the loop calls at its points.

The loop (trainer.py) runs the steps and calls every hook, in order:
  begin(loop)             after the training state is restored, before the first step
  before_step(loop)       before each step
  after_step(loop, out)   after each step; `out` holds the step's host-side scalars
  end(loop)               after the last step (not when a step raised)
A hook stops the run with `loop.stop(reason)`; the later hooks of that step still run (the
validation and the checkpoint of a run stopped by its time budget). The hooks:

  DivergenceGuard  a non-finite loss stops training unsaved; an exploding one is reported
  TimeBudget       train.max_minutes over every resumed invocation
  Throughput       the progress line and the train/ scalars every log_every steps
  Validation       validation every eval_every steps: best/, early stopping (patience), the
                   learning rate's decay on plateaus
  Checkpointing    the whole training state every checkpoint_every steps and at the end
"""

import collections
import contextlib
import dataclasses
import math
import os
import time
from typing import Any, Optional

from absl import logging
import numpy as np

from nmt_tf.experiment.run_dir import restore_model
from nmt_tf.training import faults
from nmt_tf.training.divergence import DivergenceWatch
from nmt_tf.training.errors import NonFiniteLossError
from nmt_tf.write_path import write_text


@dataclasses.dataclass
class Loop:
  """What the hooks see of the running loop.

  Attributes:
    steps: the run's last step (train.steps).
    step: the steps done, over every invocation.
    epoch, consumed: the epoch and the batches of it consumed so far.
    first_step: the step this invocation began at.
    progress: the console's ProgressPrinter.
    summaries: the TensorBoard Summaries.
    clock: seconds of training over every invocation (the time budget's clock).
    reason: why the loop stops ("completed" while it runs to train.steps).
    loss: the last step's loss.
    result: the last ValidationResult, or None.
  """

  steps: int
  step: int
  epoch: int
  consumed: int
  progress: Any
  summaries: Any
  clock: Any
  first_step: int = 0
  reason: str = "completed"
  loss: Optional[float] = None
  result: Any = None

  def stop(self, reason):
    """Ends the run after this step's hooks, for `reason` (the first one given holds)."""
    if self.reason == "completed":
      self.reason = reason

  @property
  def stopping(self):
    return self.reason != "completed"

  @property
  def done(self):
    return self.step >= self.steps or self.stopping


class Hook:
  """A duty of the loop (module docstring); every method does nothing by default."""

  def begin(self, loop):
    pass

  def before_step(self, loop):
    pass

  def after_step(self, loop, out):
    pass

  def end(self, loop):
    pass


class DivergenceGuard(Hook):
  """NonFiniteLossError at a non-finite loss (nothing of that step is saved); a warning when
  the loss explodes but stays finite (divergence.py).

  Args:
    initial_loss: log V of the target vocabulary, the watch's highest reference.
    latest: returns the newest checkpoint, named in the error.
  """

  def __init__(self, initial_loss, latest):
    self.watch = DivergenceWatch(initial_loss=initial_loss)
    self.latest = latest

  def after_step(self, loop, out):
    if not math.isfinite(loop.loss):
      raise NonFiniteLossError(
          f"Non-finite loss ({loop.loss}) at step {loop.step}; training stopped without saving "
          f"it. The last good checkpoint is {self.latest()}; lower train.learning_rate, raise "
          "train.warmup_steps, set train.clip_norm or use train.precision='float32'.")
    warning = self.watch.update(loop.step, loop.loss)
    if warning:
      logging.info("%s", warning)  # once on the console, as the trainer's warnings
      loop.progress.message(warning)


class TimeBudget(Hook):
  """Stops the run once train.max_minutes of training (summed over resumed invocations) are
  spent; the run then validates and saves as at its last step.

  Args:
    minutes: the budget (0: none).
    start: time.time() when this invocation began.
  """

  def __init__(self, minutes, start):
    self.minutes = minutes
    self.seconds = 60.0 * minutes
    self.start = start

  def spent_before(self, loop):
    """Whether earlier invocations spent the whole budget (then no step is taken)."""
    return bool(self.seconds) and loop.clock() >= self.seconds

  def begin(self, loop):
    if not self.seconds:
      return
    loop.progress.deadline = time.time() + self.seconds - loop.clock()
    if self.spent_before(loop):
      loop.progress.message(f"The time budget train.max_minutes={self.minutes:g} was spent by "
                            f"earlier runs (step {loop.step}); raise it to train on.")
      loop.stop("time_budget")

  def after_step(self, loop, out):
    if self.seconds and loop.clock() >= self.seconds:
      loop.stop("time_budget")

  def end(self, loop):
    if loop.reason == "time_budget" and loop.step > loop.first_step:
      loop.progress.message(f"Stopped at step {loop.step}: the time budget of "
                            f"train.max_minutes={self.minutes:g} is spent.")


class Throughput(Hook):
  """The progress line (the speed of the last 20 steps, so that validations and checkpoints
  between steps do not make it jump) and, every log_every steps, the train/ scalars (tokens/s
  over the window since the last ones) and the objective's section (objectives.py)."""

  def __init__(self, log_every, objective, section="reinforce"):
    self.log_every = log_every
    self.objective = objective
    self.section = section
    self.recent = collections.deque(maxlen=20)  # (target tokens, seconds) of the last steps
    self.window_tokens, self.window_start = 0.0, time.time()
    self.step_start = time.time()

  def begin(self, loop):
    self.window_tokens, self.window_start = 0.0, time.time()

  def before_step(self, loop):
    self.step_start = time.time()

  def after_step(self, loop, out):
    tokens = float(out["tokens"])
    self.window_tokens += tokens
    elapsed = max(time.time() - self.window_start, 1e-6)
    self.recent.append((tokens, time.time() - self.step_start))
    loop.progress.update(loop.step, loop.loss, sum(t for t, _ in self.recent) /
                         max(sum(d for _, d in self.recent), 1e-6))
    if loop.step % self.log_every:
      return
    loop.summaries.scalars({
        "loss": loop.loss, "perplexity": math.exp(min(loop.loss, 50.0)),
        "learning_rate": float(out["learning_rate"]), "grad_norm": float(out["grad_norm"]),
        "tokens_per_sec": self.window_tokens / elapsed}, loop.step, "train")
    scalars = self.objective.summary(out)
    if scalars:
      loop.summaries.scalars({key: float(value) for key, value in scalars.items()}, loop.step,
                             self.section)
    self.window_tokens, self.window_start = 0.0, time.time()


class Validation(Hook):
  """Validation every eval_every steps, at the last step and when the run stops: best/ on a
  BLEU gain (with train.moving_average_decay, of the averaged weights), early stopping after
  `patience` validations without a gain, and the learning rate times plateau_factor after
  every plateau_patience of them (schedules.py).

  Args:
    validator: the Validator of the validation split.
    train_config: TrainConfig (eval_every, patience, plateau_factor, plateau_patience).
    state: the RunState (best_bleu, bad_evals).
    keeper: the CheckpointKeeper (best/).
    model, optimizer: the model (an unscored best/ is measured with it) and its optimizer.
    lr_scale: the plateau's learning-rate factor variable, or None.
    weight_average: the WeightAverage, or None.
    validation_dir: where each validation's hypotheses go (None: nowhere, a non-chief worker).
  """

  def __init__(self, validator, train_config, state, keeper, model, optimizer, lr_scale=None,
               weight_average=None, validation_dir=None):
    self.validator = validator
    self.config = train_config
    self.state = state
    self.keeper = keeper
    self.model = model
    self.optimizer = optimizer
    self.lr_scale = lr_scale
    self.weight_average = weight_average
    self.validation_dir = validation_dir

  def after_step(self, loop, out):
    if not (loop.step % self.config.eval_every == 0 or loop.step == loop.steps
            or loop.stopping):
      return
    loop.result = self.validate(loop.summaries, loop.progress, loop.step)
    self.decay_on_plateau(loop.progress, loop.step)
    # The budget clock (training time over every resumed invocation, stops excluded): the
    # time axis of the results report's curves.
    loop.summaries.scalars({"train_minutes": loop.clock() / 60.0}, loop.step, "valid")
    if self.config.patience and self.state.read("bad_evals") >= self.config.patience:
      loop.stop("early_stopping")

  def end(self, loop):
    if loop.reason == "early_stopping":
      loop.progress.message(f"Early stopping at step {loop.step}: no BLEU gain in "
                            f"{self.config.patience} validations.")

  def validate(self, summaries, progress, step):
    """Validates (the averaged weights with train.moving_average_decay), saves best/ on a
    gain and counts the validations without one; returns the ValidationResult."""
    weights = (self.weight_average.applied() if self.weight_average is not None
               else contextlib.nullcontext())
    with weights:
      result = self.validator.run()
      faults.point("validation", step)
      summaries.validation(result, step)
      mark = self._record(result, step)
    progress.message(f"validation at step {step}: loss {result.loss:.4f}  perplexity "
                     f"{result.perplexity:.2f}  BLEU {result.bleu:.2f} (length ratio "
                     f"{result.length_ratio:.3f}){mark}")
    if self.validation_dir and result.hypotheses:
      os.makedirs(self.validation_dir, exist_ok=True)
      write_text(os.path.join(self.validation_dir, f"step_{step}.txt"),
                 "".join(h + "\n" for h in result.hypotheses))
    return result

  def _record(self, result, step):
    """Saves best/ on a gain, else counts a bad validation; the mark of the console line."""
    best = self.state.read("best_bleu")
    # Compared as stored: a float64 BLEU above its own float32 rounding would otherwise be a
    # "new best" at every validation, and early stopping would never trigger.
    bleu = float(np.float32(result.bleu))
    if not bleu > best:
      self.state["bad_evals"].assign_add(1)
      return f" (best {best:.2f})"
    # The run's own best (patience, early stopping) follows the training state; best/ is
    # replaced only when the BLEU also beats the score recorded with it, which an earlier run
    # in this directory may have set higher.
    self.state["best_bleu"].assign(bleu)
    self.state["bad_evals"].assign(0)
    if self.keeper.save_best(step, bleu) is not None or not self.keeper.chief:
      return " (new best)"
    kept = self.keeper.best_score()  # best/ keeps a model scored as high or higher
    return (f" (best of this run; best/ keeps {self.keeper.best}, " +
            (f"BLEU {kept:.2f})" if math.isfinite(kept) else "whose score is unknown)"))

  def decay_on_plateau(self, progress, step):
    """Multiplies the learning rate by train.plateau_factor after every plateau_patience
    validations without a BLEU gain (schedules.py)."""
    cfg = self.config
    bad = self.state.read("bad_evals")
    if self.lr_scale is None or bad == 0 or bad % cfg.plateau_patience:
      return
    self.lr_scale.assign(self.lr_scale * cfg.plateau_factor)
    rate = float(self.optimizer.learning_rate)
    progress.message(f"Learning rate x {cfg.plateau_factor:g} after {bad} validations without "
                     f"a BLEU gain: {rate:.3g} at step {step}.")

  def score_best(self, progress):
    """Measures and records the validation BLEU of an unscored best/ model (a kill between
    saving it and recording its score), so that only a better model replaces it; the
    trainer asks for it before the loop. The training weights are put back afterwards."""
    best = self.keeper.unscored_best()
    progress.message(f"{best} has no recorded score (saved by an older version or "
                     "interrupted); measuring its validation BLEU.")
    weights = [variable.numpy() for variable in self.model.variables]
    restore_model(self.model, best, "move best/ aside (or restore it from a backup) and rerun")
    bleu = float(np.float32(self.validator.run().bleu))
    for variable, value in zip(self.model.variables, weights):
      variable.assign(value)
    self.keeper.record_best(bleu, best)
    progress.message(f"{best}: validation BLEU {bleu:.2f}, recorded in best/score.json.")


class Checkpointing(Hook):
  """Saves the whole training state every checkpoint_every steps, at the last step and when
  the run stops: the step, the data position (after `consumed` batches of `epoch`, or a
  streamed split's position, data_order.py), the clocks, and the keeper's objects.

  Args:
    every: train.checkpoint_every.
    keeper: the CheckpointKeeper.
    state: the RunState.
    order: the training split's batch order (its `position` of a streamed split).
    strategy: the distribution strategy (a streamed split's position is gathered over it).
    cpu_clock: CPU seconds of training over every invocation.
  """

  def __init__(self, every, keeper, state, order, strategy, cpu_clock):
    self.every = every
    self.keeper = keeper
    self.state = state
    self.order = order
    self.strategy = strategy
    self.cpu_clock = cpu_clock

  def after_step(self, loop, out):
    if loop.step % self.every == 0 or loop.step == loop.steps or loop.stopping:
      self.save(loop)

  def save(self, loop):
    epoch, consumed = loop.epoch, loop.consumed
    self.state["train_seconds"].assign(loop.clock())
    self.state["cpu_seconds"].assign(self.cpu_clock())
    self.state["step"].assign(loop.step)
    position = self.order.position(consumed, self.strategy)  # None unless streamed
    if position is not None:
      text, epoch, consumed = position
      self.state["data_position"].assign(text)
    self.state["epoch"].assign(epoch)
    self.state["batch_in_epoch"].assign(consumed)
    self.keeper.save(loop.step)
