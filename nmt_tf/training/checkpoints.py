"""Fault-tolerant checkpoints: atomic saves, corrupt-checkpoint fallback, best-BLEU copy.

A save writes `ckpt-N.data-*` and `ckpt-N.index` first and only then replaces the small
`checkpoint` state file (write to a temporary file + rename), so a process killed at any moment
leaves the state file pointing at the previous complete checkpoint. Restoring verifies the
checkpoint (tensor checksums are checked while reading, and every object of the training state
must be matched); a corrupt or partial checkpoint is renamed to `ckpt-N.corrupt-*`, reported,
and the previous one is tried. State added after a checkpoint was written (named `optional`,
e.g. the time-budget clock) is not required: it keeps its initial value.
"""

import glob
import os
import shutil

from absl import logging
import tensorflow as tf

from nmt_tf.experiment.run_dir import CHECKPOINT_ERRORS, error_summary, verify_checkpoint
from nmt_tf.training.errors import TrainingError


class CheckpointKeeper:
  """The `checkpoints/` (full state) and `best/` (model only) directories of a run.

  Args:
    objects: {name: trackable} of the whole training state (saved as one tf.train.Checkpoint).
    model_checkpoint: tf.train.Checkpoint(model=...) for best/.
    checkpoint_dir, best_dir: the run's directories.
    keep: checkpoints kept in checkpoint_dir.
    scratch_dir: where a non-chief worker saves (then deletes); None for the chief.
    optional: names in `objects` that older checkpoints may lack (state added later); a
      checkpoint without them restores the rest and leaves them at their initial values.
  """

  def __init__(self, objects, model_checkpoint, checkpoint_dir, best_dir, keep=3,
               scratch_dir=None, optional=()):
    self.objects = dict(objects)
    self.optional = tuple(optional)
    unknown = [name for name in self.optional if name not in self.objects]
    if unknown:
      raise ValueError(f"optional names {unknown} are not in the checkpointed objects")
    self.checkpoint = tf.train.Checkpoint(**self.objects)
    self.model_checkpoint = model_checkpoint
    self.checkpoint_dir = checkpoint_dir
    self.best_dir = best_dir
    self.scratch_dir = scratch_dir
    self.keep = keep
    self._manager = self._best_manager = None

  def _managers(self):
    """CheckpointManagers, made after restore_latest so that they see its quarantines."""
    if self._manager is None:
      own = self.scratch_dir
      self._manager = tf.train.CheckpointManager(
          self.checkpoint, self.checkpoint_dir if own is None else
          os.path.join(own, "checkpoints"), self.keep)
      self._best_manager = tf.train.CheckpointManager(
          self.model_checkpoint, self.best_dir if own is None else os.path.join(own, "best"), 1)
    return self._manager, self._best_manager

  def restore_latest(self, report=print):
    """Restores the newest usable checkpoint of checkpoint_dir.

    Args:
      report: called with a one-line message for each corrupt checkpoint skipped.

    Returns:
      The restored path, or None when there is none (a fresh run).
    """
    state = tf.train.get_checkpoint_state(self.checkpoint_dir)
    if state is None:
      return None
    candidates = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    if state.model_checkpoint_path not in candidates:
      candidates.append(state.model_checkpoint_path)
    for path in reversed(candidates):
      path = path if os.path.isabs(path) else os.path.join(self.checkpoint_dir, path)
      try:
        # Before restore(): a failed one leaves deferred restorations behind.
        keys = verify_checkpoint(path)
        missing = [name for name in self.optional
                   if not any(key.startswith(name + "/") for key in keys)]
        checkpoint = self.checkpoint if not missing else tf.train.Checkpoint(
            **{name: obj for name, obj in self.objects.items() if name not in missing})
        status = checkpoint.restore(path)
        status.assert_existing_objects_matched()
        if missing:
          report(f"Checkpoint {path} predates {', '.join(missing)} (left at the initial "
                 "value).")
        return path
      except CHECKPOINT_ERRORS as error:
        logging.warning("Checkpoint %s is corrupt or partial (%s); trying the previous one.",
                        path, error_summary(error, limit=200))
        report(f"WARNING: checkpoint {path} is corrupt or partial ({type(error).__name__}); "
               "using the previous one.")
        if self.scratch_dir is None:
          _quarantine(path)
    raise TrainingError(f"Every checkpoint in {self.checkpoint_dir} is corrupt or partial; move "
                        "the directory away to start afresh, or pass a new --run_dir.")

  def save(self, step):
    """Saves the training state as ckpt-<step>; returns the path written by the chief."""
    path = self._managers()[0].save(checkpoint_number=step)
    if self.scratch_dir is not None:
      shutil.rmtree(os.path.join(self.scratch_dir, "checkpoints"), ignore_errors=True)
      return None
    return path

  def save_best(self, step):
    """Saves the model alone into best/ (the previous best is removed after the new save)."""
    path = self._managers()[1].save(checkpoint_number=step)
    if self.scratch_dir is not None:
      shutil.rmtree(os.path.join(self.scratch_dir, "best"), ignore_errors=True)
      return None
    return path

  @property
  def latest(self):
    return tf.train.latest_checkpoint(self.checkpoint_dir)

  @property
  def best(self):
    return tf.train.latest_checkpoint(self.best_dir)


def _quarantine(path):
  """Renames ckpt-N.* to ckpt-N.corrupt.* and drops it from the state file."""
  for name in glob.glob(glob.escape(path) + ".*"):
    suffix = name[len(path):]
    try:
      os.replace(name, f"{path}.corrupt{suffix}")
    except OSError:
      pass
  directory = os.path.dirname(path)
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return
  def _full(p):
    return p if os.path.isabs(p) else os.path.join(directory, p)
  remaining = [p for p in state.all_model_checkpoint_paths if _full(p) != path]
  if remaining:
    tf.compat.v1.train.update_checkpoint_state(directory, remaining[-1], remaining)
  else:
    os.remove(os.path.join(directory, "checkpoint"))
