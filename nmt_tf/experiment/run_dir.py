"""The run directory: everything a run writes and every later command reads.

`RunDir` is the only place that names a run's files and folders (the constants below; the
write path's guards and every command ask it), owns the run's one lock and reads its
manifest, format version included:

  <run_dir>/config.json     the ExperimentConfig (vocabulary sizes filled in)
  <run_dir>/vocab/          the tokenizers (nmt_tf.data.save_tokenizers)
  <run_dir>/checkpoints/    tf.train.CheckpointManager: model, optimizer, step, ...
                            (corrupt/: checkpoints set aside as unusable)
  <run_dir>/best/           the checkpoint with the best validation BLEU (model only) and
                            score.json, the BLEU and step it was saved with
  <run_dir>/manifest.json   checksums of vocab/, of the config's model sections and of the
                            checkpoints' index files, verified by every loader (run_manifest),
                            and the run's format (upgrade.py)
  <run_dir>/corpus.json     the fingerprint of the corpus the run trains on
  <run_dir>/train.lock      the lock: pid and host of the process writing the run (run_lock)
  <run_dir>/train_summary.json  the last training invocation's summary
  <run_dir>/tensorboard/    event files
  <run_dir>/validation/     greedy output on the validation split, step_<N>.txt per validation
  <run_dir>/averaged/       checkpoint averages (`nmt-tf average`)
  <run_dir>/export/         SavedModels for TF Serving (`nmt-tf export`)
  <run_dir>/shortlist.npz   the vocabulary shortlist's table (decode.shortlist), counted on
                            first use
  <run_dir>/shapes/         the generated shapes set of a captioning run (data.data_dir unset)
  <run_dir>/.workers/       the scratch saves of the non-chief workers of a multi-worker run

Opening a run (`load_config`) upgrades a run of an older format in memory (upgrade.py);
training writes it back in the current one.
"""

import contextlib
import os

import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import target_tags
from nmt_tf import manifest
from nmt_tf.write_path import write_text
from nmt_tf.experiment import checkpoint_files
from nmt_tf.experiment import run_manifest
from nmt_tf.experiment import upgrade
from nmt_tf.experiment.config import ExperimentConfig
from nmt_tf.models import build_model
from nmt_tf.models.config import ConfigError

CONFIG_FILE = "config.json"  # what makes a folder a run directory
MANIFEST_FILE = "manifest.json"
CORPUS_FILE = "corpus.json"
LOCK_FILE = "train.lock"
SUMMARY_FILE = "train_summary.json"
SHORTLIST_FILE = "shortlist.npz"
VOCAB_DIR, CHECKPOINT_DIR, BEST_DIR = "vocab", "checkpoints", "best"
TENSORBOARD_DIR, VALIDATION_DIR = "tensorboard", "validation"
AVERAGED_DIR, EXPORT_DIR, WORKERS_DIR = "averaged", "export", ".workers"
SHAPES_DIR = "shapes"
# The folders that hold models, and the command that owns each (write_path.py guards them).
MODEL_FOLDERS = {BEST_DIR: "train", CHECKPOINT_DIR: "train", EXPORT_DIR: "export"}
# What else of the run its models are loaded or trained with: written by `train` only.
RUN_FILES = (CONFIG_FILE, MANIFEST_FILE, CORPUS_FILE, LOCK_FILE, VOCAB_DIR)

# What reading a damaged or mismatched checkpoint raises: OpError (DataLossError on a bad
# checksum, NotFoundError), IndexError (a truncated data file: "Read less bytes than
# requested"), AssertionError / ValueError (objects not matched).
CHECKPOINT_ERRORS = (tf.errors.OpError, IndexError, AssertionError, ValueError)

# Sections that define what the run's checkpoints mean; changing them needs a new run_dir.
FIXED_SECTIONS = ("model", "data", "tokenizer")
# Model fields used only to initialise fresh weights: a reopened run keeps its saved value.
INIT_ONLY_MODEL_FIELDS = ("embedding_init_std",)


class RunDirError(ValueError):
  """A missing or inconsistent run directory or checkpoint."""


class RunDir:
  """Paths and loaders of one run directory (see module docstring)."""

  def __init__(self, path):
    if not path:
      raise RunDirError("Received an empty run directory; pass --run_dir=PATH.")
    self.path = os.path.abspath(path)
    self.config_path = os.path.join(self.path, CONFIG_FILE)
    self.manifest_path = os.path.join(self.path, MANIFEST_FILE)
    self.corpus_path = os.path.join(self.path, CORPUS_FILE)
    self.summary_path = os.path.join(self.path, SUMMARY_FILE)
    self.vocab_dir = os.path.join(self.path, VOCAB_DIR)
    self.checkpoint_dir = os.path.join(self.path, CHECKPOINT_DIR)
    self.best_dir = os.path.join(self.path, BEST_DIR)
    self.tensorboard_dir = os.path.join(self.path, TENSORBOARD_DIR)
    self.validation_dir = os.path.join(self.path, VALIDATION_DIR)
    self.averaged_dir = os.path.join(self.path, AVERAGED_DIR)
    self.export_dir = os.path.join(self.path, EXPORT_DIR)
    self.shortlist_path = os.path.join(self.path, SHORTLIST_FILE)
    self.shapes_dir = os.path.join(self.path, SHAPES_DIR)

  def worker_dir(self, index):
    """Where non-chief worker `index` saves its scratch checkpoints."""
    return os.path.join(self.path, WORKERS_DIR, f"worker_{index}")

  def lock(self, report=None):
    """The run's one lock (run_lock.RunLock, not yet taken): whoever writes the run's state
    takes it; training holds it while it runs."""
    from nmt_tf.experiment import run_lock  # pylint: disable=import-outside-toplevel
    return run_lock.RunLock(self.path, report=report)

  @contextlib.contextmanager
  def writing(self):
    """Holds the run's lock for the block, unless this process holds it already (a
    training run recording a checkpoint); RunDirError when another process holds it."""
    lock = self.lock()
    if lock.held_here():
      yield
      return
    lock.acquire()
    try:
      yield
    finally:
      lock.release()

  def record_checkpoint(self, path):
    """Records checkpoint `path` (inside the run) in the manifest (run_manifest.py)."""
    run_manifest.add_checkpoint(self, path)

  def run_format(self):
    """The run's format version (upgrade.py): its manifest's run_format, 1 without one;
    RunDirError for a format this release cannot read."""
    rec = manifest.read(self.path)
    run_format = (rec or {}).get("run_format", 1)
    try:
      upgrade.check_format(run_format, self.manifest_path)
    except ConfigError as error:
      raise RunDirError(str(error)) from None
    return run_format

  def exists(self):
    return os.path.isfile(self.config_path)

  def load_config(self):
    """The run's ExperimentConfig; RunDirError if the run was never prepared or its
    config.json is damaged."""
    if not self.exists():
      raise RunDirError(f"No config.json in {self.path}; train first with "
                        f"`nmt-tf train --run_dir={self.path}`.")
    run_format = self.run_format()
    try:
      with open(self.config_path, encoding="utf-8") as f:
        text = f.read()
    except OSError as error:
      raise RunDirError(f"{self.config_path} is unreadable ({error.strerror}); restore it "
                        "from a backup of the run.") from None
    try:
      return ExperimentConfig.from_json(text, run_format)
    except (ValueError, TypeError, AttributeError) as error:  # JSON, or not a config
      reason = " ".join(str(error).split())[:160]
      raise RunDirError(
          f"{self.config_path} is damaged ({type(error).__name__}: {reason}); restore it from "
          "a backup, or write it again with the run's recipe: delete it and rerun `nmt-tf "
          f"train --run_dir={self.path}` with the --config the run was trained with (its "
          "TensorBoard logs keep a copy under the text tab, 'config').") from None

  def save_config(self, config):
    os.makedirs(self.path, exist_ok=True)
    write_text(self.config_path, config.to_json())  # never a half-written config

  def load_tokenizers(self):
    return data.load_tokenizers(self.vocab_dir)

  def prepare(self, config, corpus=None, write=True, parent=None):
    """Creates or reopens the run for `config`: corpus, tokenizers, vocabulary sizes.

    A reopened run must have the same model, data and tokenizer sections (train, pipeline
    and decode settings may change, e.g. more steps); it keeps its saved initialisation
    settings (INIT_ONLY_MODEL_FIELDS), which its checkpoints have made irrelevant. With
    `write`, the config and manifest are written (in the current run format): the holder of
    the run's lock does; the other workers of a multi-worker run read what it wrote.
    `parent`: the manifest entry of the run it was initialised from (`parent.record`), for
    a fine-tuned run; an earlier entry is kept.

    Returns:
      (config with vocabulary sizes, corpus splits, source tokenizer, target tokenizer).
    """
    corpus = corpus if corpus is not None else data.load_corpus(config.data)
    src_tok, tgt_tok = data.load_or_train_tokenizers(self.vocab_dir, config.tokenizer,
                                                     corpus["train"], tag_symbols(config))
    model_cfg = config.model.replace(src_vocab_size=src_tok.vocab_size,
                                     tgt_vocab_size=tgt_tok.vocab_size)
    config = config.replace(model=model_cfg)
    if self.exists():
      saved = self.load_config()
      if run_manifest.verify(self, saved, src_tok, tgt_tok) is None:
        check_vocab_sizes(saved, src_tok, tgt_tok, self.vocab_dir)
      config = config.replace(model=config.model.replace(
          **{name: getattr(saved.model, name) for name in INIT_ONLY_MODEL_FIELDS}))
      for section in FIXED_SECTIONS:
        if getattr(saved, section) != getattr(config, section):
          raise ConfigError(
              f"{self.path} was created with a different {section} config "
              f"({_diff(getattr(saved, section), getattr(config, section))}); use a new "
              "--run_dir or the run's own config.")
    if write:
      self.save_config(config)
      run_manifest.write(self, config, src_tok, tgt_tok, parent)
    return config, corpus, src_tok, tgt_tok

  def checkpoint_path(self, which="best"):
    """Path of checkpoint `which`: "best", "last" or an explicit checkpoint prefix."""
    if which in ("best", "last"):
      directory = self.best_dir if which == "best" else self.checkpoint_dir
      path = (checkpoint_files.best_checkpoint(directory) if which == "best"
              else checkpoint_files.latest(directory))
      if path is None and which == "best":
        lost = run_manifest.best_checkpoints_listed(self)
        if lost:  # validated, then best/ was deleted: the last checkpoint is not the best
          raise RunDirError(f"{self.best_dir} holds no checkpoint, but the run saved "
                            f"{lost[-1]} there ({os.path.join(self.path, 'manifest.json')}); "
                            "restore it, or pass --checkpoint=last to take the last "
                            "checkpoint.")
        path = checkpoint_files.latest(self.checkpoint_dir)  # never validated yet
      if path is None:
        raise RunDirError(f"No checkpoint in {directory}; train first with "
                          f"`nmt-tf train --run_dir={self.path}`.")
      return path
    if not tf.io.gfile.exists(which + ".index"):
      raise RunDirError(f"No checkpoint at {which!r} (no {which}.index); pass 'best', 'last' "
                        "or a checkpoint prefix such as RUN/checkpoints/ckpt-3.")
    return which

  def load_model(self, which="best", hard_inference=None):
    """Builds the run's model and restores checkpoint `which` into it.

    Args:
      which: "best", "last" or a checkpoint prefix.
      hard_inference: optional "expectation" or "argmax" in place of the run's
        model.hard_inference (a hard-attention run only): the context a decoding step takes.

    Returns:
      (model, config, source tokenizer, target tokenizer); config.model holds the
      hard_inference the model decodes with.
    """
    config = self.load_config()
    src_tok, tgt_tok = self.load_tokenizers()
    if run_manifest.verify(self, config, src_tok, tgt_tok) is None:
      check_vocab_sizes(config, src_tok, tgt_tok, self.vocab_dir)
    path = self.checkpoint_path(which)
    run_manifest.verify_checkpoint(self, path)
    if hard_inference is not None:
      config = config.replace(model=with_hard_inference(config.model, hard_inference,
                                                        self.path))
    # Every weight comes from `path`.
    model = build_model(config.model, initialize=False, checkpoint=path)
    restore_model(model, path, "pass --checkpoint=last or another checkpoint prefix")
    return model, config, src_tok, tgt_tok


def tag_symbols(config):
  """The target-language tags of `config`'s corpus, which the source vocabulary keeps whole
  (data/target_tags.py); () without tags."""
  return tuple(target_tags.tag(language)
               for language in target_tags.target_languages(config.data))


def with_hard_inference(model_config, hard_inference, run_path):
  """model_config decoding hard attention with `hard_inference`; RunDirError for a run whose
  attention is soft, where the option means nothing."""
  if model_config.attention_mode != "hard":
    raise RunDirError(f"hard_inference={hard_inference!r} applies to hard attention, and "
                      f"{run_path} was trained with model.attention_mode="
                      f"{model_config.attention_mode!r}; leave hard_inference out.")
  return model_config.replace(hard_inference=hard_inference)


def check_vocab_sizes(config, src_tok, tgt_tok, vocab_dir):
  """RunDirError unless the tokenizers have the vocabulary sizes the run's model was built
  with (a vocabulary file cut short or replaced would otherwise translate wrongly)."""
  for side, tokenizer, key in (("source", src_tok, "src_vocab_size"),
                               ("target", tgt_tok, "tgt_vocab_size")):
    expected = getattr(config.model, key)
    if expected is not None and tokenizer.vocab_size != expected:
      raise RunDirError(
          f"The {side} vocabulary in {vocab_dir} has {tokenizer.vocab_size} entries, but the "
          f"run's model was trained with {expected} (config.json, model.{key}): a vocabulary "
          f"file was cut short or replaced; restore {vocab_dir} from a backup of the run.")


def restore_model(model, path, fix):
  """Restores checkpoint `path` into `model`; RunDirError naming the reason and `fix` (how to
  get round it) when the checkpoint is damaged or belongs to another model."""
  try:
    verify_checkpoint(path)  # before restore(): a failed one leaves deferred restorations
    status = tf.train.Checkpoint(model=model).restore(path).expect_partial()
    status.assert_existing_objects_matched()
  except CHECKPOINT_ERRORS as error:
    raise RunDirError(f"Checkpoint {path} is corrupt or does not match the run's model "
                      f"({error_summary(error)}); {fix}.") from error


def verify_checkpoint(path):
  """Reads every tensor of checkpoint `path` (their checksums are checked while reading);
  returns their keys. Raises one of CHECKPOINT_ERRORS for a damaged checkpoint."""
  reader = tf.train.load_checkpoint(path)
  keys = list(reader.get_variable_to_shape_map())
  for name in keys:
    reader.get_tensor(name)
  return keys


def error_summary(error, limit=160):
  """'Type: first line of the message' of an exception, cut to about `limit` characters."""
  lines = str(error).strip().splitlines()
  reason = lines[0].strip() if lines else ""
  if len(reason) > limit:
    reason = reason[:limit] + "..."
  return f"{type(error).__name__}: {reason}" if reason else type(error).__name__


def _diff(saved, new):
  a, b = saved.__dict__, new.__dict__
  changed = [f"{k}: {a[k]!r} -> {b.get(k)!r}" for k in a if a[k] != b.get(k)]
  return ", ".join(changed[:3]) or "different values"

