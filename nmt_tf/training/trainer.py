"""The training loop of a translation model: `Trainer(config, run_dir).train()`.

Each step runs `TrainStep` (one tf.function, distributed by the config's strategy); every
`log_every` steps the scalars go to TensorBoard, every `eval_every` steps `Validator` computes
loss, perplexity and greedy BLEU (best BLEU -> run_dir/best, early stopping on `patience`, the
learning rate's decay on `plateau_patience`), and every `checkpoint_every` steps the whole state
(model, optimizer, step, data position, random streams of dropout and hard attention, REINFORCE
baseline, best BLEU, patience counter, weight average, learning-rate factor) is saved
atomically. Running the same command again resumes from the newest usable checkpoint (see
checkpoints.py, data_order.py).

The run directory is guarded (docs/TRAINING.md, "Interruptions, corruption and other
processes"): one training process at a time (experiment/run_lock.py), the corpus the run began
with (experiment/corpus_fingerprint.py), a best/ model replaced only by a better one, and no
silent restart from step 0 when the training state is missing or corrupt. Without a validation
split the run trains without validation: the last checkpoint is the model.
"""

import atexit
import collections
import contextlib
import json
import math
import os
import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from nmt_tf import cpu
from nmt_tf.layers import kernels
from nmt_tf.write_path import write_json, write_text
from nmt_tf.experiment import corpus_fingerprint, ExperimentConfig, RunDir, run_manifest
from nmt_tf.experiment.run_dir import restore_model
from nmt_tf.experiment.run_lock import RunLock
from nmt_tf.models import build_model
from nmt_tf.training import distribution
from nmt_tf.training import faults
from nmt_tf.training.checkpoints import CheckpointKeeper
from nmt_tf.training.data_order import batch_order
from nmt_tf.training.divergence import DivergenceWatch
from nmt_tf.training.errors import NonFiniteLossError, TrainingError
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.progress import ProgressPrinter
from nmt_tf.training.schedules import learning_rate_schedule
from nmt_tf.training.summaries import Summaries
from nmt_tf.training import reinforce
from nmt_tf.training.train_step import TrainStep
from nmt_tf.training.validation import Validator
from nmt_tf.training.weight_average import WeightAverage


BF16_PRECISIONS = ("float32_bf16_matmul", "mixed_bfloat16")


def bf16_warning(precision, cpu_info=None, gpus=None):
  """Why `precision` is slow here, or None: bfloat16 matrix products on a CPU without
  AVX512_BF16 or AMX-BF16 (nmt_tf/cpu.py; `cpu_info` defaults to this machine's) are converted
  and run slower than float32."""
  native = cpu.native_bf16(cpu_info)
  gpus = tf.config.list_physical_devices("GPU") if gpus is None else gpus
  if precision not in BF16_PRECISIONS or native is not False or gpus:
    return None
  return (f"train.precision={precision!r} takes bfloat16 matrix products, but this CPU has no "
          "AVX512_BF16 or AMX-BF16 instructions, so they run slower than float32 "
          "(docs/PERFORMANCE.md); set "
          "--config.train.precision=float32 on this machine, unless the run is to be compared "
          "with runs trained in bfloat16 products.")


def compiled_cell_notice(model, train_cfg):
  """One line when the model's GRU steps train on plain ops although the compiled cell would
  serve them (layers/kernels/compiled.py says why), else None."""
  choice = model.decoder.loops.choice
  if not choice.compiled_cell or train_cfg.jit_compile:
    return None
  reason = kernels.compiled.unavailable_reason()
  if reason is None:
    return None
  return (f"The compiled GRU cell is unavailable ({reason}): training runs the same steps on "
          "plain TensorFlow ops, more slowly.")


# The state of training options that a resumed run may turn on (train.moving_average_decay,
# train.plateau_factor): a checkpoint written before holds none of it.
OPTION_STATE = ("weight_average", "lr_scale", "reward_variance", "reinforce_baseline_head",
                "reinforce_baseline_optimizer")


def seed_generator_states(model):
  """The state variables of the model's Keras SeedGenerators (the dropout masks' random
  streams). Keras leaves them out of tf.train.Checkpoint(model=...); checkpointed separately,
  a resumed run draws the masks that an uninterrupted run would have drawn."""
  return [generator.state for layer in model._flatten_layers()  # pylint: disable=protected-access
          for generator in getattr(layer, "_seed_generators", ())]


def _read(variable):
  """The host value of a (possibly mirrored) scalar variable."""
  return variable.read_value().numpy()


def _resumed_clock(before, now, start):
  """A clock reading `before` seconds (earlier invocations) plus now() - start (this one)."""
  return lambda: before + now() - start


class Trainer:
  """Trains one run directory (see module docstring).

  Args:
    config: ExperimentConfig, or an ml_collections ConfigDict / dict (validated here).
    run_dir: the run directory (created, or reopened to resume).
    corpus: optional preloaded corpus splits (default: loaded from config.data).
    stream: console stream of the progress line (default sys.stdout).
    restart_from_scratch: train from step 0 when no checkpoint is usable although the run
      has trained before (the user's decision after a refusal; best/ is kept and guarded).
    accept_changed_corpus: go on although the corpus differs from the one the run began with.

  What a kind of corpus changes is in four methods, which a subclass overrides (the captioning
  trainer, training/captioning.py): `prepare_data` (the splits, tokenizers and the run's
  vocabulary), `make_validator` (the validation pass), `training_batches` (the training
  batches) and `no_batch_message` (the error when a pass gives no batch).
  """

  def __init__(self, config, run_dir, corpus=None, stream=None, restart_from_scratch=False,
               accept_changed_corpus=False):
    if not isinstance(config, ExperimentConfig):
      config = ExperimentConfig.from_dict(config)
    train_cfg = config.train
    self.strategy = distribution.make_strategy(train_cfg.strategy)
    self.worker = distribution.worker_info(train_cfg.strategy)
    self.run_dir = RunDir(run_dir)
    self.restart_from_scratch = restart_from_scratch
    self.stream = stream
    self.lock = None
    if self.worker.is_chief:
      self.lock = RunLock(self.run_dir.path, report=self._warn).acquire()
      atexit.register(self.lock.release)
    try:
      self._build(config, corpus, accept_changed_corpus)
    except BaseException:
      self._release()
      raise

  def _build(self, config, corpus, accept_changed_corpus):
    """Prepares the run directory and builds the model, optimizer, state and train step."""
    train_cfg = config.train
    if not self.worker.is_chief:
      distribution.barrier(self.strategy)  # the chief prepares the run directory first
    self.prepare_data(config, corpus, accept_changed_corpus)
    if self.worker.is_chief and self.worker.num_workers > 1:
      distribution.barrier(self.strategy)
    keras.utils.set_random_seed(train_cfg.seed)
    # train.precision=auto is decided here, at every start, for the machine at hand.
    self.precision, reason = cpu.resolve_precision(
        train_cfg.precision, gpus=tf.config.list_physical_devices("GPU"))
    warning = bf16_warning(train_cfg.precision)
    if self.worker.is_chief:
      if reason:
        self._warn(f"Precision: {self.precision} ({reason}).")
      if warning:
        logging.warning(warning)
    # Every worker's position in its stream of a streamed corpus (JSON, data_order.py); made
    # outside the strategy's scope, as collectives cannot broadcast a string.
    data_position = tf.Variable("", dtype=tf.string, trainable=False, name="data_position")
    with self.strategy.scope():
      self.model = build_model(self.config.model, self.precision)
      cell = compiled_cell_notice(self.model, train_cfg)
      if cell and self.worker.is_chief:
        self._warn(cell)
      # k of the learning rate's decay on plateaus (schedules.py), when train.plateau_factor.
      self.lr_scale = (tf.Variable(1.0, trainable=False, name="lr_scale")
                       if train_cfg.plateau_factor else None)
      optimizer = FusedAdam(learning_rate=learning_rate_schedule(train_cfg, self.lr_scale))
      if self.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
      optimizer.build(self.model.trainable_variables)
      self.optimizer = optimizer
      self.state = {name: tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
                    for name in ("step", "epoch", "batch_in_epoch", "bad_evals")}
      self.state["best_bleu"] = tf.Variable(-1.0, trainable=False, name="best_bleu")
      # Seconds spent in the training loop by earlier invocations (train.max_minutes).
      self.state["train_seconds"] = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                                name="train_seconds")
      # CPU seconds of the process over the same time: on a VM whose cores are partly taken by
      # other guests (steal time), a wall-clock budget buys less compute, and this shows it.
      self.state["cpu_seconds"] = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                              name="cpu_seconds")
      self.state["data_position"] = data_position
      self.baseline = tf.Variable(0.0, trainable=False, name="reinforce_baseline")
      self.baseline_steps = tf.Variable(0.0, trainable=False, name="reinforce_baseline_steps")
      objects = dict(model=self.model, optimizer=optimizer, reinforce_baseline=self.baseline,
                     reinforce_baseline_steps=self.baseline_steps, **self.state)
      self.weight_average = None
      if train_cfg.moving_average_decay:
        self.weight_average = WeightAverage(self.model.trainable_variables,
                                            train_cfg.moving_average_decay)
        objects["weight_average"] = self.weight_average
      if self.lr_scale is not None:
        objects["lr_scale"] = self.lr_scale
      hard = self.config.model.attention_mode == "hard"
      self.reward_variance = self.baseline_head = self.baseline_optimizer = None
      if hard and train_cfg.reinforce_normalize:  # sigma^2 of the reward (reinforce.py)
        self.reward_variance = tf.Variable(0.0, trainable=False, name="reward_variance")
        objects["reward_variance"] = self.reward_variance
      if hard and reinforce.baseline_kind(train_cfg) == "learned":
        self.baseline_head = reinforce.LearnedBaseline(name="reinforce_baseline_head")
        self.baseline_head(tf.zeros([1, 1, self.config.model.decoder_units]))
        self.baseline_optimizer = keras.optimizers.Adam(train_cfg.learning_rate)
        self.baseline_optimizer.build(self.baseline_head.trainable_variables)
        objects["reinforce_baseline_head"] = self.baseline_head
        objects["reinforce_baseline_optimizer"] = self.baseline_optimizer
      states = seed_generator_states(self.model)
      if states:  # none without dropout and hard attention
        objects["rng"] = tf.Module(name="rng")
        objects["rng"].seed_generator_states = states
    scratch = None if self.worker.is_chief else os.path.join(
        self.run_dir.path, ".workers", f"worker_{self.worker.index}")
    self.keeper = CheckpointKeeper(objects, tf.train.Checkpoint(model=self.model),
                                   self.run_dir.checkpoint_dir, self.run_dir.best_dir,
                                   train_cfg.keep_checkpoints, scratch_dir=scratch,
                                   optional=[name for name in OPTION_STATE if name in objects],
                                   on_saved=lambda path: run_manifest.add_checkpoint(
                                       self.run_dir, path))
    self.train_step = TrainStep(self.model, optimizer, self.strategy, train_cfg, self.baseline,
                                self.baseline_steps,
                                hard_attention=self.config.model.attention_mode == "hard",
                                weight_average=self.weight_average,
                                reward_variance=self.reward_variance,
                                baseline_head=self.baseline_head,
                                baseline_optimizer=self.baseline_optimizer)

  def prepare_data(self, config, corpus, accept_changed_corpus):
    """Sets config (with the vocabulary sizes), corpus, src_tok and tgt_tok for the run, and
    checks the corpus against the one the run began with."""
    self.config, self.corpus, self.src_tok, self.tgt_tok = self.run_dir.prepare(config, corpus)
    if self.worker.is_chief:
      corpus_fingerprint.check(self.run_dir.path, self.corpus, accept_changed_corpus,
                               report=self._warn)

  def make_validator(self):
    """The Validator of the validation split."""
    return Validator(self.model, self.src_tok, self.tgt_tok, self.corpus["valid"], self.config)

  def training_batches(self):
    """The training split's batch order (data_order.py): `epoch(epoch, skip, saved)` gives
    a dataset of batches, `position(consumed, strategy)` a streamed split's position."""
    return batch_order(self.corpus["train"], self.src_tok, self.tgt_tok, self.config.pipeline,
                       self.worker.num_workers, self.worker.index)

  def _warn(self, text):
    """A warning for the console (once: the log gets it at INFO level, which --verbose shows
    on the terminal too)."""
    logging.info("%s", text)
    print(text, file=self.stream, flush=True)

  def _release(self):
    if self.lock is not None:
      self.lock.release()

  def train(self):
    """Trains to config.train.steps, early stopping or the time budget; returns the summary."""
    try:
      return self._train()
    finally:
      self._release()

  def _train(self):
    cfg = self.config.train
    start = time.time()
    progress = ProgressPrinter(cfg.steps, cfg.log_every, self.stream)
    self.keeper.tidy(progress.message)
    restored = self.keeper.restore_latest(progress.message, self.restart_from_scratch)
    step = self._first_step = int(_read(self.state["step"]))
    if restored:
      progress.message(f"Resumed from {restored} at step {step}.")
    spent_before = float(_read(self.state["train_seconds"]))  # by earlier invocations
    budget = 60.0 * cfg.max_minutes
    self._clock = _resumed_clock(spent_before, time.time, start)
    self._cpu_clock = _resumed_clock(float(_read(self.state["cpu_seconds"])),
                                     time.process_time, time.process_time())
    if budget:
      progress.deadline = start + budget - spent_before
      if spent_before >= budget:
        progress.message(f"The time budget train.max_minutes={cfg.max_minutes:g} was spent "
                         f"by earlier runs (step {step}); raise it to train on.")
        return self._summary("time_budget", step, start, None)
    summaries = Summaries(self.run_dir.tensorboard_dir if self.worker.is_chief else None)
    summaries.config(self.config, step)
    validator = None
    if "valid" in self.corpus:
      validator = self.make_validator()
    else:
      progress.message("No validation split: training without validation (no BLEU, no early "
                       "stopping, no best/); the last checkpoint is the model.")
    if validator is not None and self.keeper.unscored_best():
      self._score_best(validator, progress)
    divergence = DivergenceWatch(initial_loss=math.log(self.config.model.tgt_vocab_size))
    order = self.training_batches()
    epoch, consumed = int(_read(self.state["epoch"])), int(_read(self.state["batch_in_epoch"]))
    saved_position = _read(self.state["data_position"]).decode("utf-8")
    reason, last_result, loss = "completed", None, None
    window_tokens, window_start = 0.0, time.time()
    recent = collections.deque(maxlen=20)  # (target tokens, seconds) of the last steps
    try:
      while step < cfg.steps and reason == "completed":
        dataset = self.strategy.experimental_distribute_dataset(
            order.epoch(epoch, consumed, saved_position))
        if step == self._first_step:
          self.train_step.trace(dataset.element_spec)  # once, for every batch shape
        saved_position = ""  # a later epoch starts at its beginning
        seen = 0
        for batch in dataset:
          step_start = time.time()
          out = self.train_step(batch, diagnose=(step + 1) % cfg.log_every == 0)
          loss = float(out["loss"])
          step, consumed, seen = step + 1, consumed + 1, seen + 1
          if not math.isfinite(loss):
            raise NonFiniteLossError(
                f"Non-finite loss ({loss}) at step {step}; training stopped without saving it. "
                f"The last good checkpoint is {self.keeper.latest}; lower "
                "train.learning_rate, raise train.warmup_steps, set train.clip_norm or use "
                "train.precision='float32'.")
          warning = divergence.update(step, loss)
          if warning:
            logging.info("%s", warning)  # once on the console, as _warn does
            progress.message(warning)
          tokens = float(out["tokens"])
          window_tokens += tokens
          elapsed = max(time.time() - window_start, 1e-6)
          # The progress line's speed: the last 20 steps' tokens over their own time, so that
          # validations and checkpoints between steps do not make it jump.
          recent.append((tokens, time.time() - step_start))
          progress.update(step, loss, sum(t for t, _ in recent) /
                          max(sum(d for _, d in recent), 1e-6))
          if step % cfg.log_every == 0:
            summaries.scalars({
                "loss": loss, "perplexity": math.exp(min(loss, 50.0)),
                "learning_rate": float(out["learning_rate"]),
                "grad_norm": float(out["grad_norm"]),
                "tokens_per_sec": window_tokens / elapsed}, step, "train")
            if "baseline" in out:  # hard attention: the REINFORCE estimate (reinforce.py)
              summaries.scalars({key: float(value) for key, value in
                                 reinforce.summary(out).items()}, step, "reinforce")
            window_tokens, window_start = 0.0, time.time()
          if budget and self._clock() >= budget and reason == "completed":
            reason = "time_budget"
          if validator and (step % cfg.eval_every == 0 or step == cfg.steps
                            or reason == "time_budget"):
            last_result = self._validate(validator, summaries, progress, step)
            self._decay_on_plateau(progress, step)
            # The budget clock (training time over every resumed invocation, stops
            # excluded): the time axis of the results report's curves.
            summaries.scalars({"train_minutes": self._clock() / 60.0}, step, "valid")
            if (reason == "completed" and cfg.patience
                and int(_read(self.state["bad_evals"])) >= cfg.patience):
              reason = "early_stopping"
          if (step % cfg.checkpoint_every == 0 or step == cfg.steps
              or reason != "completed"):
            self._save(step, epoch, consumed, order)
          if step >= cfg.steps or reason != "completed":
            break
        else:
          if seen == 0 and consumed == 0:
            raise TrainingError(self.no_batch_message())
          epoch, consumed = epoch + 1, 0
    finally:
      progress.close()
      summaries.close()
    if reason == "early_stopping":
      progress.message(f"Early stopping at step {step}: no BLEU gain in {cfg.patience} "
                       "validations.")
    elif reason == "time_budget":
      progress.message(f"Stopped at step {step}: the time budget of train.max_minutes="
                       f"{cfg.max_minutes:g} is spent.")
    return self._summary(reason, step, start, last_result, loss)

  def no_batch_message(self):
    """Why a pass over the training split gave no batch: a streamed split is filtered as it
    is read, so every pair it holds may be over the length limits (or, with several workers,
    this worker's part may be empty)."""
    pipeline = self.config.pipeline
    workers = self.worker.num_workers
    where = (f"worker {self.worker.index} of {workers}'s part of the training split" if
             workers > 1 else "the training split")
    return (f"No training batch: every pair of {where} is longer than "
            f"pipeline.max_source_len={pipeline.max_source_len} or "
            f"pipeline.max_target_len={pipeline.max_target_len} tokens, or has an empty side; "
            "raise the limits (--config.pipeline.max_source_len=... and max_target_len=...) "
            "or check the corpus" + (", or use fewer workers." if workers > 1 else
                                               "."))

  def _validate(self, validator, summaries, progress, step):
    """Validates, and saves best/ on a gain: with train.moving_average_decay, the averaged
    weights (training/weight_average.py)."""
    weights = (self.weight_average.applied() if self.weight_average is not None
               else contextlib.nullcontext())
    with weights:
      return self._validate_weights(validator, summaries, progress, step)

  def _validate_weights(self, validator, summaries, progress, step):
    result = validator.run()
    faults.point("validation", step)
    summaries.validation(result, step)
    best = float(_read(self.state["best_bleu"]))
    # Compared as stored: a float64 BLEU above its own float32 rounding would otherwise be a
    # "new best" at every validation, and early stopping would never trigger.
    bleu = float(np.float32(result.bleu))
    if bleu > best:
      # The run's own best (patience, early stopping) follows the training state; best/ is
      # replaced only when the BLEU also beats the score recorded with it, which an earlier
      # run in this directory may have set higher.
      self.state["best_bleu"].assign(bleu)
      self.state["bad_evals"].assign(0)
      mark = " (new best)"
      if self.keeper.save_best(step, bleu) is None and self.worker.is_chief:
        # best/ keeps a model scored as high or higher (or unscored).
        kept = self.keeper.best_score()
        mark = (f" (best of this run; best/ keeps {self.keeper.best}, " +
                (f"BLEU {kept:.2f})" if math.isfinite(kept) else "whose score is unknown)"))
    else:
      self.state["bad_evals"].assign_add(1)
      mark = f" (best {best:.2f})"
    progress.message(f"validation at step {step}: loss {result.loss:.4f}  perplexity "
                     f"{result.perplexity:.2f}  BLEU {result.bleu:.2f} (length ratio "
                     f"{result.length_ratio:.3f}){mark}")
    if self.worker.is_chief and result.hypotheses:
      os.makedirs(self.run_dir.validation_dir, exist_ok=True)
      write_text(os.path.join(self.run_dir.validation_dir, f"step_{step}.txt"),
                 "".join(h + "\n" for h in result.hypotheses))
    return result

  def _decay_on_plateau(self, progress, step):
    """Multiplies the learning rate by train.plateau_factor after every plateau_patience
    validations without a BLEU gain (schedules.py)."""
    cfg = self.config.train
    bad = int(_read(self.state["bad_evals"]))
    if self.lr_scale is None or bad == 0 or bad % cfg.plateau_patience:
      return
    self.lr_scale.assign(self.lr_scale * cfg.plateau_factor)
    rate = float(self.optimizer.learning_rate)
    progress.message(f"Learning rate x {cfg.plateau_factor:g} after {bad} validations without "
                     f"a BLEU gain: {rate:.3g} at step {step}.")

  def _score_best(self, validator, progress):
    """Measures and records the validation BLEU of an unscored best/ model, so that only a
    better model replaces it. The training weights are put back afterwards."""
    best = self.keeper.unscored_best()
    progress.message(f"{best} has no recorded score (saved by an older version or "
                     "interrupted); measuring its validation BLEU.")
    weights = [variable.numpy() for variable in self.model.variables]
    restore_model(self.model, best, "move best/ aside (or restore it from a backup) and rerun")
    bleu = float(np.float32(validator.run().bleu))
    for variable, value in zip(self.model.variables, weights):
      variable.assign(value)
    self.keeper.record_best(bleu, best)
    progress.message(f"{best}: validation BLEU {bleu:.2f}, recorded in best/score.json.")

  def _save(self, step, epoch, consumed, order):
    """Saves a checkpoint after `consumed` batches of epoch `epoch` of `order` (data_order.py;
    a streamed split's position replaces epoch and batch)."""
    self.state["train_seconds"].assign(self._clock())
    self.state["cpu_seconds"].assign(self._cpu_clock())
    self.state["step"].assign(step)
    position = order.position(consumed, self.strategy)  # None unless streamed
    if position is not None:
      text, epoch, consumed = position
      self.state["data_position"].assign(text)
    self.state["epoch"].assign(epoch)
    self.state["batch_in_epoch"].assign(consumed)
    self.keeper.save(step)

  def _summary(self, reason, step, start, result, loss=None):
    """The run's summary, written to train_summary.json; an invocation that took no step
    (the run was done) returns the record of the last one that did and keeps it."""
    path = os.path.join(self.run_dir.path, "train_summary.json")
    if step == self._first_step and os.path.exists(path):
      try:
        with open(path, encoding="utf-8") as f:
          return json.load(f)
      except (OSError, ValueError):
        pass  # unreadable: this invocation's summary replaces it
    summary = {
        "steps": step,
        "loss": loss,
        "best_bleu": float(_read(self.state["best_bleu"])),
        "wall_time": time.time() - start,
        "train_seconds": self._clock(),
        "cpu_seconds": self._cpu_clock(),
        "precision": self.precision,  # train.precision=auto resolved on this machine
        "checkpoint": self.keeper.latest,
        "best_checkpoint": self.keeper.best,
        "stopped": reason,
        "last_validation": None if result is None else {
            "loss": result.loss, "perplexity": result.perplexity, "bleu": result.bleu},
    }
    if self.worker.is_chief:
      write_json(path, summary)
    return summary

