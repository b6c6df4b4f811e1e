"""The parent of a fine-tuned run: `nmt-tf train --init_from=RUN` starts from another run.

A fine-tuned run (the child) is a run directory of its own whose first weights are a
checkpoint of another run (the parent): its `best/` by default, `RUN:last` for its last
checkpoint, or a checkpoint prefix (`RUN/checkpoints/ckpt-3`). The child keeps the parent's
model section and vocabularies (its tokenizer section and `vocab/` files), takes its data,
pipeline, training and decode sections from its own config, and starts a fresh optimizer. Of
the model section it may change only what shapes no weight (TUNABLE_MODEL_FIELDS: dropout and
how hard attention decodes); any other field that differs from the parent's is refused in one
line. The parent is only read: its manifest is verified, and the child's manifest records
where it came from (`record`).
"""

import dataclasses
import glob
import os
import shutil
from typing import Optional

import tensorflow as tf

from nmt_tf import data
from nmt_tf import manifest
from nmt_tf import write_path
from nmt_tf.data import vocab_update
from nmt_tf.experiment import run_manifest
from nmt_tf.experiment.run_dir import RunDir, RunDirError
from nmt_tf.models import build_model, vocab_rows

# Model fields a child may set to its own values: none of them shapes a weight.
TUNABLE_MODEL_FIELDS = ("dropout", "source_word_dropout", "target_word_dropout",
                        "embedding_dropout", "hidden_dropout", "hard_inference",
                        "hard_expectation_rate", "hard_expectation_draw",
                        "embedding_init_std")
_VOCAB_SIZE_FIELDS = ("src_vocab_size", "tgt_vocab_size")


@dataclasses.dataclass
class Parent:
  """A run to start from: its directory, the checkpoint taken and its config."""

  run: RunDir
  checkpoint: str
  config: object  # ExperimentConfig
  update_vocab: Optional[str] = None  # None (its vocabularies kept), "merge" or "replace"


def resolve(init_from, update_vocab=None):
  """The Parent that --init_from names: RUN (its best/), RUN:last, or a checkpoint prefix
  inside a run (RUN/best/ckpt-5, RUN/checkpoints/ckpt-3).

  Raises:
    RunDirError: no run or checkpoint there (one line naming the fix).
  """
  path, which = init_from, "best"
  if init_from.endswith(":last"):
    path, which = init_from[:-len(":last")], "last"
  if not os.path.isfile(os.path.join(path, "config.json")):
    prefix = path  # a checkpoint prefix: its run is the folder above checkpoints/ or best/
    path = os.path.dirname(os.path.dirname(os.path.abspath(prefix)))
    if not os.path.isfile(os.path.join(path, "config.json")):
      raise RunDirError(f"--init_from={init_from} is neither a run directory (no config.json) "
                        "nor a checkpoint of one; pass RUN, RUN:last or "
                        "RUN/checkpoints/ckpt-N.")
    which = prefix
  if update_vocab not in (None,) + vocab_update.MODES:
    raise RunDirError(f"--update_vocab={update_vocab} is not a mode; pass "
                      f"{' or '.join(vocab_update.MODES)}, or leave it out to keep the "
                      "parent's vocabularies.")
  run = RunDir(path)
  config = run.load_config()
  checkpoint = run.checkpoint_path(which)
  run_manifest.verify_checkpoint(run, checkpoint)
  return Parent(run, checkpoint, config, update_vocab)


def check_recorded(parent, run):
  """RunDirError when `run` was initialised from another checkpoint than `parent`'s (its
  manifest's entry): a run has one parent."""
  rec = manifest.read(run.path) or {}
  before = rec.get("parent")
  if before is None:
    if rec.get("checkpoints"):
      raise RunDirError(f"{run.path} has trained without --init_from; fine-tune into a new "
                        "--run_dir, or leave --init_from out to resume it.")
    return
  if (before.get("run_dir"), before.get("checkpoint")) != _origin(parent):
    origin = os.path.join(before.get("run_dir", "?"), before.get("checkpoint", "?"))
    raise RunDirError(f"{run.path} was initialised from {origin}, not {parent.checkpoint}; "
                      "fine-tune into a new --run_dir, or give that --init_from.")
  if before.get("update_vocab") != parent.update_vocab:
    said = lambda mode: f"--update_vocab={mode}" if mode else "no --update_vocab"
    raise RunDirError(f"{run.path} was initialised with {said(before.get('update_vocab'))}, "
                      f"not {said(parent.update_vocab)}; resume it as it began, or fine-tune "
                      "into a new --run_dir.")


def child_config(config, parent):
  """`config` with the parent's model and tokenizer sections, its tunable model fields kept.

  Raises:
    RunDirError: `config` gives another value to a field that shapes the model or the
      vocabularies (one line naming it and the parent's value).
  """
  ours, theirs = config.model, parent.config.model
  for field in dataclasses.fields(ours):
    name = field.name
    if name in TUNABLE_MODEL_FIELDS + _VOCAB_SIZE_FIELDS:
      continue
    if getattr(ours, name) != getattr(theirs, name):
      raise RunDirError(
          f"model.{name} is {getattr(ours, name)!r} here and {getattr(theirs, name)!r} in the "
          f"parent {parent.run.path}: a fine-tuned run keeps its parent's model; leave it out "
          "or give the parent's recipe (only dropout and hard_inference settings may change).")
  if config.tokenizer != parent.config.tokenizer:
    raise RunDirError(
        f"the tokenizer section differs from the parent's ({parent.run.config_path}): a "
        "fine-tuned run keeps its parent's vocabularies; give the parent's tokenizer settings.")
  model = theirs.replace(**{name: getattr(ours, name) for name in TUNABLE_MODEL_FIELDS})
  return config.replace(model=model)


def write_vocabularies(parent, run, train_split, symbols=()):
  """Writes the run's vocab/ (which must not exist yet): a copy of the parent's, or with
  `parent.update_vocab` the vocabularies of `train_split` merged with or replacing the
  parent's (data/vocab_update.py), the source one keeping `symbols` whole.

  Raises:
    RunDirError: the parent's vocabularies are kept, and its source vocabulary lacks one of
      `symbols` (a target-language tag the parent was not trained with).
  """
  if not parent.update_vocab and symbols:
    source, _ = parent.run.load_tokenizers()
    missing = [symbol for symbol in symbols if symbol not in source.vocab]
    if missing:
      raise RunDirError(f"the parent's source vocabulary lacks the target-language tags "
                        f"{', '.join(missing)}; pass --update_vocab=merge to add them.")
  with write_path.staged_folder(run.vocab_dir) as staging:
    if parent.update_vocab:
      source, target = parent.run.load_tokenizers()
      data.save_tokenizers(staging, *vocab_update.update_tokenizers(
          parent.update_vocab, source, target, parent.config.tokenizer, train_split,
          symbols))
      return
    for name in sorted(os.listdir(parent.run.vocab_dir)):
      source = os.path.join(parent.run.vocab_dir, name)
      if os.path.isfile(source):
        shutil.copyfile(source, os.path.join(staging, name))


def initialise(parent, model, source, target):
  """Sets `model`'s weights (a child built with the tokenizers `source` and `target`) to the
  parent's checkpoint: all of them, or with updated vocabularies the rows of the tokens the
  parent also has, the others keeping their initial values (models/vocab_rows.py)."""
  if not parent.update_vocab:
    _restore(model, parent.checkpoint)
    return
  # Built as the child was, so that the weights have the same paths (a model built for
  # decoding may name them otherwise); the checkpoint restores by the object graph.
  old_model = build_model(parent.config.model)
  _restore(old_model, parent.checkpoint)
  old_source, old_target = parent.run.load_tokenizers()
  vocab_rows.transfer(old_model, model, {"source": vocab_update.row_map(old_source, source),
                                         "target": vocab_update.row_map(old_target, target)})


def _restore(model, path):
  """Every weight of `model` from the model of the training checkpoint `path`."""
  checkpoint = tf.train.Checkpoint(model=model)
  checkpoint.restore(path).expect_partial().assert_existing_objects_matched()


def record(parent):
  """The manifest entry of the parent: its run, checkpoint and their files' checksums."""
  run = parent.run
  files = [os.path.join(os.path.basename(run.vocab_dir), name)
           for name in sorted(os.listdir(run.vocab_dir))]
  files += [os.path.relpath(path, run.path)
            for path in sorted(glob.glob(glob.escape(parent.checkpoint) + ".*"))]
  run_dir, checkpoint = _origin(parent)
  entry = {"run_dir": run_dir, "checkpoint": checkpoint,
           "checksums": {name: manifest.sha256(os.path.join(run.path, name))
                         for name in files}}
  if parent.update_vocab:
    entry["update_vocab"] = parent.update_vocab
  return entry


def _origin(parent):
  """(the parent's run directory, absolute; its checkpoint, relative to it)."""
  return (os.path.abspath(parent.run.path),
          os.path.relpath(os.path.abspath(parent.checkpoint), parent.run.path))
