"""The training loop of a translation model: `Trainer(config, run_dir).train()`.

The trainer builds its parts and runs the loop:
  RunDir          the run directory, its one lock and its files (experiment/run_dir.py)
  model, FusedAdam, the learning-rate schedule (schedules.py), the weight average
  objective       what the step minimises, with its own state (objectives.py)
  RunState        the loop's counters and clocks (state.py)
  CheckpointKeeper  checkpoints/ and best/ (checkpoints.py): the model, the optimizer, the
                  RunState, the objective's state, the dropout masks' random streams, ...
  TrainStep       one update, a tf.function distributed by the config's strategy
  hooks           the loop's duties (hooks.py): divergence, time budget, throughput,
                  validation with best/, early stopping and plateaus, checkpointing
Running the same command again resumes from the newest usable checkpoint (checkpoints.py,
data_order.py), exactly: the data position and every random stream are checkpointed.

The run directory is guarded (docs/TRAINING.md, "Interruptions, corruption and other
processes"): one training process at a time (the run's lock), the corpus the run began with
(experiment/corpus_fingerprint.py), a best/ model replaced only by a better one, and no
silent restart from step 0 when the training state is missing or corrupt. Without a validation
split the run trains without validation: the last checkpoint is the model.
"""

import atexit
import json
import math
import os
import time

from absl import logging
import keras
import tensorflow as tf

from nmt_tf import cpu
from nmt_tf import data
from nmt_tf.layers import kernels
from nmt_tf.write_path import write_json
from nmt_tf.experiment import corpus_fingerprint, ExperimentConfig, RunDir
from nmt_tf.experiment import parent as parent_lib
from nmt_tf.experiment.run_dir import tag_symbols
from nmt_tf.models import build_model
from nmt_tf.training import distribution
from nmt_tf.training.checkpoints import CheckpointKeeper
from nmt_tf.training import hooks
from nmt_tf.training import objectives
from nmt_tf.training.data_order import batch_order
from nmt_tf.training.errors import TrainingError
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.progress import ProgressPrinter
from nmt_tf.training.schedules import learning_rate_schedule
from nmt_tf.training.summaries import Summaries
from nmt_tf.training.state import RunState
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
# train.plateau_factor; the objective names its own): a checkpoint written before holds none.
OPTION_STATE = ("weight_average", "lr_scale")


def seed_generator_states(model):
  """The state variables of the model's Keras SeedGenerators (the dropout masks' random
  streams). Keras leaves them out of tf.train.Checkpoint(model=...); checkpointed separately,
  a resumed run draws the masks that an uninterrupted run would have drawn."""
  return [generator.state for layer in model._flatten_layers()  # pylint: disable=protected-access
          for generator in getattr(layer, "_seed_generators", ())]


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
    init_from: fine-tune: start a new run from another run's weights (experiment/parent.py:
      RUN, RUN:last or a checkpoint prefix); the run keeps that run's model and vocabularies.
      A run that has checkpoints resumes from them.
    update_vocab: with init_from, "merge" or "replace": the run's vocabularies are made from
      its own corpus (data/vocab_update.py) in place of the parent's.

  What a kind of corpus changes is in four methods, which a subclass overrides (the captioning
  trainer, training/captioning.py): `prepare_data` (the splits, tokenizers and the run's
  vocabulary), `make_validator` (the validation pass), `training_batches` (the training
  batches) and `no_batch_message` (the error when a pass gives no batch).
  """

  def __init__(self, config, run_dir, corpus=None, stream=None, restart_from_scratch=False,
               accept_changed_corpus=False, init_from=None, update_vocab=None):
    if not isinstance(config, ExperimentConfig):
      config = ExperimentConfig.from_dict(config)
    self.strategy = distribution.make_strategy(config.train.strategy)
    self.worker = distribution.worker_info(config.train.strategy)
    self.run_dir = RunDir(run_dir)
    self.restart_from_scratch = restart_from_scratch
    self.init_from = init_from
    self.update_vocab = update_vocab
    self.parent = None  # the parent_lib.Parent of a fine-tuned run
    self.stream = stream
    self.lock = None
    if self.worker.is_chief:
      self.lock = self.run_dir.lock(report=self._warn).acquire()
      atexit.register(self.lock.release)
    try:
      self._build(config, corpus, accept_changed_corpus)
    except BaseException:
      self._release()
      raise

  def _build(self, config, corpus, accept_changed_corpus):
    """Prepares the run directory and builds the model, optimizer, state and train step."""
    if not self.worker.is_chief:
      distribution.barrier(self.strategy)  # the chief prepares the run directory first
    if self.init_from is not None:
      self.parent = parent_lib.resolve(self.init_from, self.update_vocab)
      parent_lib.check_recorded(self.parent, self.run_dir)
      config = parent_lib.child_config(config, self.parent)
      if self.worker.is_chief and not os.path.exists(self.run_dir.vocab_dir):
        if self.parent.update_vocab and corpus is None:
          corpus = data.load_corpus(config.data)  # the new vocabularies are made from it
        parent_lib.write_vocabularies(self.parent, self.run_dir,
                                      corpus["train"] if corpus else None, tag_symbols(config))
    self.prepare_data(config, corpus, accept_changed_corpus)
    if self.worker.is_chief and self.worker.num_workers > 1:
      distribution.barrier(self.strategy)
    keras.utils.set_random_seed(config.train.seed)
    self.precision = self._resolve_precision(config.train)
    # Made outside the strategy's scope, as collectives cannot broadcast a string.
    data_position = tf.Variable("", dtype=tf.string, trainable=False, name="data_position")
    with self.strategy.scope():
      self._build_parts(data_position)
    self.keeper = CheckpointKeeper(
        self._checkpointed(), tf.train.Checkpoint(model=self.model),
        self.run_dir.checkpoint_dir, self.run_dir.best_dir, self.config.train.keep_checkpoints,
        scratch_dir=None if self.worker.is_chief else self.run_dir.worker_dir(self.worker.index),
        optional=self._optional(), on_saved=self.run_dir.record_checkpoint)
    self.train_step = TrainStep(self.model, self.optimizer, self.strategy, self.config.train,
                                self.objective, weight_average=self.weight_average)

  def _resolve_precision(self, train_cfg):
    """train.precision, with auto decided here, at every start, for the machine at hand."""
    precision, reason = cpu.resolve_precision(
        train_cfg.precision, gpus=tf.config.list_physical_devices("GPU"))
    warning = bf16_warning(train_cfg.precision)
    if self.worker.is_chief:
      if reason:
        self._warn(f"Precision: {precision} ({reason}).")
      if warning:
        logging.warning(warning)
    return precision

  def _build_parts(self, data_position):
    """The model, optimizer, objective and loop state (under the strategy's scope)."""
    train_cfg = self.config.train
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
    self.state = RunState(data_position)
    self.objective = objectives.build(self.config)
    self.weight_average = None
    if train_cfg.moving_average_decay:
      self.weight_average = WeightAverage(self.model.trainable_variables,
                                          train_cfg.moving_average_decay)

  def _checkpointed(self):
    """{name: trackable} of the whole training state, as the checkpoints name them."""
    objects = dict(model=self.model, optimizer=self.optimizer, **self.objective.state(),
                   **self.state.objects())
    if self.weight_average is not None:
      objects["weight_average"] = self.weight_average
    if self.lr_scale is not None:
      objects["lr_scale"] = self.lr_scale
    states = seed_generator_states(self.model)
    if states:  # none without dropout and hard attention
      objects["rng"] = tf.Module(name="rng")
      objects["rng"].seed_generator_states = states
    return objects

  def _optional(self):
    """The checkpointed names a checkpoint written before an option was turned on lacks."""
    names = [name for name in OPTION_STATE if getattr(self, name) is not None]
    return names + list(self.objective.optional)

  def prepare_data(self, config, corpus, accept_changed_corpus):
    """Sets config (with the vocabulary sizes), corpus, src_tok and tgt_tok for the run, and
    checks the corpus against the one the run began with."""
    self.config, self.corpus, self.src_tok, self.tgt_tok = self.run_dir.prepare(
        config, corpus, write=self.worker.is_chief,
        parent=None if self.parent is None else parent_lib.record(self.parent))
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
    start = time.time()
    loop = self._restore(start)
    budget = hooks.TimeBudget(self.config.train.max_minutes, start)
    if budget.spent_before(loop):
      budget.begin(loop)
      return self._summary(loop, start)
    loop.summaries = Summaries(self.run_dir.tensorboard_dir if self.worker.is_chief else None)
    loop.summaries.config(self.config, loop.step)
    throughput = hooks.Throughput(self.config.train.log_every, self.objective)
    duties, order = self._hooks(loop, throughput)
    duties.insert(0, budget)
    try:
      for hook in duties:
        hook.begin(loop)
      for batch in self._batches(loop, order):
        for hook in duties:
          hook.before_step(loop)
        out = self.train_step(batch, diagnose=(loop.step + 1) % self.config.train.log_every == 0)
        loop.loss, loop.step, loop.consumed = float(out["loss"]), loop.step + 1, loop.consumed + 1
        for hook in duties:
          hook.after_step(loop, out)
        if loop.done:
          break
    finally:
      loop.progress.close()
      loop.summaries.close()
    for hook in duties:
      hook.end(loop)
    return self._summary(loop, start)

  def _restore(self, start):
    """Restores the newest usable checkpoint; returns the Loop where it left off."""
    cfg = self.config.train
    progress = ProgressPrinter(cfg.steps, cfg.log_every, self.stream)
    self.keeper.tidy(progress.message)
    restored = self.keeper.restore_latest(progress.message, self.restart_from_scratch)
    step = self.state.read("step")
    if restored:
      progress.message(f"Resumed from {restored} at step {step}.")
    elif self.parent is not None:  # a fine-tuned run's first start: the parent's weights
      parent_lib.initialise(self.parent, self.model, self.src_tok, self.tgt_tok)
      vocab = (f" with the vocabularies updated ({self.parent.update_vocab}: "
               f"{self.src_tok.vocab_size:,} source and {self.tgt_tok.vocab_size:,} target "
               "tokens)" if self.parent.update_vocab else "")
      progress.message(f"Initialised from {self.parent.checkpoint}{vocab}; the optimizer "
                       "starts anew.")
    self._cpu_clock = _resumed_clock(self.state.read("cpu_seconds"), time.process_time,
                                     time.process_time())
    loop = hooks.Loop(steps=cfg.steps, step=step, epoch=self.state.read("epoch"),
                      consumed=self.state.read("batch_in_epoch"), progress=progress,
                      summaries=None, first_step=step,
                      clock=_resumed_clock(self.state.read("train_seconds"), time.time, start))
    return loop

  def _hooks(self, loop, throughput):
    """(the loop's duties after the time budget, in the order they run after each step; the
    training split's batch order)."""
    cfg = self.config.train
    validation = None
    if "valid" in self.corpus:
      validation = hooks.Validation(
          self.make_validator(), cfg, self.state, self.keeper, self.model, self.optimizer,
          self.lr_scale, self.weight_average,
          self.run_dir.validation_dir if self.worker.is_chief else None)
      if self.keeper.unscored_best():
        validation.score_best(loop.progress)
    else:
      loop.progress.message("No validation split: training without validation (no BLEU, no "
                            "early stopping, no best/); the last checkpoint is the model.")
    order = self.training_batches()
    duties = [hooks.DivergenceGuard(math.log(self.config.model.tgt_vocab_size),
                                    lambda: self.keeper.latest), throughput]
    duties += [validation] if validation is not None else []
    duties.append(hooks.Checkpointing(cfg.checkpoint_every, self.keeper, self.state, order,
                                      self.strategy, self._cpu_clock))
    return duties, order

  def _batches(self, loop, order):
    """The distributed training batches from where the loop is, epoch after epoch; sets
    loop.epoch and loop.consumed at each new epoch."""
    saved_position = self.state.read("data_position")
    while loop.step < loop.steps:
      dataset = self.strategy.experimental_distribute_dataset(
          order.epoch(loop.epoch, loop.consumed, saved_position))
      if loop.step == loop.first_step:
        self.train_step.trace(dataset.element_spec)  # once, for every batch shape
      saved_position = ""  # a later epoch starts at its beginning
      seen = 0
      for batch in dataset:
        seen += 1
        yield batch
      if seen == 0 and loop.consumed == 0:
        raise TrainingError(self.no_batch_message())
      loop.epoch, loop.consumed = loop.epoch + 1, 0

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

  def _summary(self, loop, start):
    """The run's summary, written to train_summary.json; an invocation that took no step
    (the run was done) returns the record of the last one that did and keeps it."""
    path = self.run_dir.summary_path
    if loop.step == loop.first_step and os.path.exists(path):
      try:
        with open(path, encoding="utf-8") as f:
          return json.load(f)
      except (OSError, ValueError):
        pass  # unreadable: this invocation's summary replaces it
    result = loop.result
    summary = {
        "steps": loop.step,
        "loss": loop.loss,
        "best_bleu": self.state.read("best_bleu"),
        "wall_time": time.time() - start,
        "train_seconds": loop.clock(),
        "cpu_seconds": self._cpu_clock(),
        "precision": self.precision,  # train.precision=auto resolved on this machine
        "checkpoint": self.keeper.latest,
        "best_checkpoint": self.keeper.best,
        "stopped": loop.reason,
        "last_validation": None if result is None else {
            "loss": result.loss, "perplexity": result.perplexity, "bleu": result.bleu},
    }
    if self.worker.is_chief:
      write_json(path, summary)
    return summary
