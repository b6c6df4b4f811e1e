"""Fault-tolerant checkpoints: atomic saves, recovery from the files on disk, a guarded best/.

A save writes `ckpt-N.data-*` and `ckpt-N.index` first and only then replaces the small
`checkpoint` state file (write to a temporary file + rename), so a process killed at any moment
leaves the state file pointing at the previous complete checkpoint.

Restoring never trusts the state file alone: the candidates are the checkpoints it lists and
those found on disk (checkpoint_files.py), newest first, so a missing, empty or garbage state
file is recovered from the files (and rewritten). Each candidate is verified (tensor checksums
are checked while reading, and every object of the training state must be matched); a corrupt
or partial one is moved to `checkpoints/corrupt/`, reported, and the previous one is tried.
When none is usable, or when the training checkpoints are gone but `best/` is not, training
refuses to start until the user decides (`restart_from_scratch`); nothing is deleted.

`best/` holds the model with the best validation BLEU and, beside it, `score.json` (the BLEU
and step it was saved with). It is replaced only by a model whose BLEU beats that recorded
score, so a restarted or different run in the same directory never replaces a better model
with a worse one. State that exists only while a training option is on (named `optional`: the weights'
moving average, the plateau's learning-rate scale) may be missing from a checkpoint written
before the option was turned on in the run: it keeps its initial value.
"""

import os
import shutil

from absl import logging
import tensorflow as tf

from nmt_tf.write_path import write_json
from nmt_tf.experiment import checkpoint_files
from nmt_tf.experiment.run_dir import (BEST_DIR, CHECKPOINT_DIR, CHECKPOINT_ERRORS,
                                       error_summary, RunDirError, verify_checkpoint)
from nmt_tf.training import faults
from nmt_tf.training.errors import disk_full, TrainingError



def read_best_score(best_dir):
  """The record of best/ ({"bleu", "step", "checkpoint", "metric"}) or None; RunDirError
  naming the file when it is unreadable."""
  try:
    return checkpoint_files.read_best_score(best_dir)
  except ValueError as error:
    raise RunDirError(str(error)) from None


class CheckpointKeeper:
  """The `checkpoints/` (full state) and `best/` (model only) directories of a run.

  Args:
    objects: {name: trackable} of the whole training state (saved as one tf.train.Checkpoint).
    model_checkpoint: tf.train.Checkpoint(model=...) for best/.
    checkpoint_dir, best_dir: the run's directories.
    keep: checkpoints kept in checkpoint_dir.
    scratch_dir: where a non-chief worker saves (then deletes); None for the chief.
    optional: names in `objects` that a checkpoint may lack (the state of a training option
      turned on when the run resumed); a checkpoint without them restores the rest and
      leaves them at their initial values.
    on_saved: called with the prefix of each checkpoint the chief saves (the run's
      manifest records it).
  """

  def __init__(self, objects, model_checkpoint, checkpoint_dir, best_dir, keep=3,
               scratch_dir=None, optional=(), on_saved=None):
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
    self.on_saved = on_saved or (lambda path: None)
    self._manager = self._best_manager = None

  @property
  def chief(self):
    return self.scratch_dir is None

  def _managers(self):
    """CheckpointManagers, made after restore_latest so that they see its repairs."""
    if self._manager is None:
      own = self.scratch_dir
      self._manager = tf.train.CheckpointManager(
          self.checkpoint, self.checkpoint_dir if own is None else
          os.path.join(own, CHECKPOINT_DIR), self.keep)
      best_dir = self.best_dir if own is None else os.path.join(own, BEST_DIR)
      if own is None:
        best = checkpoint_files.best_checkpoint(best_dir)
        listed, readable = checkpoint_files.read_state(best_dir)
        if not readable:
          checkpoint_files.set_aside_state_file(best_dir)  # the manager cannot parse it
        if best and (not listed or os.path.normpath(listed[-1]) != best):
          checkpoint_files.write_state(best_dir, [best])  # so that a better model replaces it
      self._best_manager = tf.train.CheckpointManager(self.model_checkpoint, best_dir, 1)
    return self._manager, self._best_manager

  def tidy(self, report=print):
    """Removes the staging directories of interrupted saves and lists the checkpoints set
    aside as corrupt. Call it while holding the run's lock, before restore_latest."""
    if not self.chief:
      return
    for directory in (self.checkpoint_dir, self.best_dir):
      removed = checkpoint_files.remove_partial_saves(directory)
      if removed:
        report(f"Removed {', '.join(removed)} in {directory}: left by a save that was "
               "interrupted while writing (never a usable checkpoint).")
    aside = checkpoint_files.set_aside_names(self.checkpoint_dir)
    if aside:
      report(f"Note: {len(aside)} checkpoint(s) set aside as corrupt are kept in "
             f"{os.path.join(self.checkpoint_dir, checkpoint_files.SET_ASIDE_DIR)} "
             f"({', '.join(aside)}); delete that directory once you no longer need them.")

  def restore_latest(self, report=print, restart_from_scratch=False):
    """Restores the newest usable checkpoint of checkpoint_dir.

    Args:
      report: called with a one-line message for each repair (corrupt checkpoint set aside,
        state file recovered).
      restart_from_scratch: the user's decision to train from step 0 when no checkpoint is
        usable (best/ is still kept and guarded by its score).

    Returns:
      The restored path, or None for a run that starts at step 0.

    Raises:
      RunDirError: no checkpoint is usable but the run has trained before (checkpoints set
        aside, a state file without checkpoints, or a best/ model), and restart_from_scratch
        is not set; or restart_from_scratch is set although a checkpoint is usable.
    """
    directory = self.checkpoint_dir
    listed, readable = checkpoint_files.read_state(directory)
    found = checkpoint_files.candidates(directory)
    if found and (not readable or not listed):
      report(f"The state file {os.path.join(directory, checkpoint_files.STATE_FILE)} is "
             f"{'unreadable' if not readable else 'missing'}; recovering from the checkpoint "
             "files on disk.")
    path = self._first_usable(found, report)
    if path is None:
      return self._none_usable(listed, readable, report, restart_from_scratch)
    if restart_from_scratch:
      raise RunDirError(
          f"--restart_from_scratch applies only when no checkpoint is usable, but {path} is; "
          "rerun without it to resume, or use a new --run_dir to start over.")
    newest_listed = max(listed, key=checkpoint_files.checkpoint_step) if listed else None
    if self.chief and (not readable or newest_listed is None
                       or os.path.normpath(newest_listed) != path):
      step = checkpoint_files.checkpoint_step(path)
      checkpoint_files.write_state(directory, [
          p for p in found if checkpoint_files.checkpoint_step(p) <= step][::-1])
    return path

  def _first_usable(self, found, report):
    """Restores the first of `found` (newest first) that restores; the chief sets each
    corrupt one aside. Returns its path, or None."""
    for path in found:
      try:
        self._restore(path, report)
        return path
      except CHECKPOINT_ERRORS as error:
        # The report says it on the console; the log keeps the error (INFO: shown once).
        logging.info("Checkpoint %s is corrupt or partial (%s); trying the previous one.",
                     path, error_summary(error, limit=200))
        if self.chief:
          aside = checkpoint_files.set_aside(path)
          report(f"WARNING: checkpoint {path} is corrupt or partial ({type(error).__name__}); "
                 f"set aside as {aside}, using the previous one.")
    return None

  def _none_usable(self, listed, readable, report, restart_from_scratch):
    """No checkpoint restores: None (step 0) for a new run or restart_from_scratch, else the
    RunDirError of restore_latest."""
    directory = self.checkpoint_dir
    if self.chief and (os.path.exists(os.path.join(directory, checkpoint_files.STATE_FILE))):
      checkpoint_files.set_aside_state_file(directory)  # it lists nothing usable
    aside = checkpoint_files.set_aside_names(directory)
    best = checkpoint_files.best_checkpoint(self.best_dir)
    if restart_from_scratch:
      report("Training from step 0 (--restart_from_scratch); "
             + (f"{best} is kept and replaced only by a model with a higher validation BLEU."
                if best else "there is no best/ model."))
      return None
    if aside or listed or not readable:
      where = os.path.join(directory, checkpoint_files.SET_ASIDE_DIR)
      raise RunDirError(
          f"No usable checkpoint in {directory}: every checkpoint is corrupt or partial (set "
          f"aside in {where}: {', '.join(aside) or 'none left on disk'}); restore the "
          "checkpoints from a backup, or rerun with --restart_from_scratch to train from "
          "step 0 (best/ is kept).")
    if best:
      raise RunDirError(
          f"{directory} has no training checkpoint but {best} exists: the run has trained "
          "before and its training state is gone; restore checkpoints/ from a backup, or "
          "rerun with --restart_from_scratch to train from step 0 (best/ is kept and "
          "replaced only by a better model).")
    return None

  def _restore(self, path, report):
    # Verified before restore(): a failed one leaves deferred restorations behind.
    keys = verify_checkpoint(path)
    missing = [name for name in self.optional
               if not any(key.startswith(name + "/") for key in keys)]
    checkpoint = self.checkpoint if not missing else tf.train.Checkpoint(
        **{name: obj for name, obj in self.objects.items() if name not in missing})
    status = checkpoint.restore(path)
    status.assert_existing_objects_matched()
    if missing:
      report(f"Checkpoint {path} predates {', '.join(missing)} (left at the initial value).")

  def save(self, step):
    """Saves the training state as ckpt-<step>; returns the path written by the chief."""
    options = tf.train.CheckpointOptions(
        experimental_write_callbacks=[lambda _: faults.point("save", step)])
    path = self._save(self._managers()[0], step, options)
    if not self.chief:
      shutil.rmtree(os.path.join(self.scratch_dir, CHECKPOINT_DIR), ignore_errors=True)
      return None
    self.on_saved(path)
    return path

  def _save(self, manager, step, options=None):
    """manager.save(step); a full disk is a TrainingError naming the fix (the staging
    directory of the failed save, never a usable checkpoint, is removed to free space)."""
    try:
      return manager.save(checkpoint_number=step, options=options)
    except (OSError, tf.errors.OpError) as error:
      if not disk_full(error):
        raise
      checkpoint_files.remove_partial_saves(manager.directory)
      raise TrainingError(
          f"No space left on device while saving checkpoint ckpt-{step} in "
          f"{manager.directory}; free disk space and rerun the same command: training resumes "
          f"from {self.latest or 'step 0'}.") from None

  def best_score(self):
    """The BLEU recorded with best/'s model; None when best/ is empty (any model may take
    it); inf when its model has no record of its own (see `unscored_best`)."""
    record = read_best_score(self.best_dir)
    best = checkpoint_files.best_checkpoint(self.best_dir)
    if best is None:
      return None
    if record is None or record.get("checkpoint") != os.path.basename(best):
      return float("inf")
    return float(record["bleu"])

  def unscored_best(self):
    """best/'s model when no score is recorded for it (written by an older version, or a kill
    between saving it and recording its score), else None. Its score must be measured
    (`record_best`) before a new model may replace it."""
    if not self.chief:
      return None
    best = checkpoint_files.best_checkpoint(self.best_dir)
    return best if best is not None and self.best_score() == float("inf") else None

  def record_best(self, bleu, path):
    """Records `bleu` as the score of best/'s model `path`."""
    write_json(os.path.join(self.best_dir, checkpoint_files.BEST_SCORE_FILE),
               {"bleu": float(bleu), "step": checkpoint_files.checkpoint_step(path),
                "checkpoint": os.path.basename(path), "metric": "validation greedy BLEU"})

  def save_best(self, step, bleu):
    """Saves the model into best/ if `bleu` beats the score recorded there.

    Returns:
      The path written, or None when best/ keeps a better (or unscored) model.
    """
    recorded = self.best_score()
    if recorded is not None and not bleu > recorded:
      return None
    path = self._save(self._managers()[1], step)
    if not self.chief:
      shutil.rmtree(os.path.join(self.scratch_dir, BEST_DIR), ignore_errors=True)
      return None
    faults.point("best", step)
    self.record_best(bleu, path)
    self.on_saved(path)
    return path

  @property
  def latest(self):
    return checkpoint_files.latest(self.checkpoint_dir)

  @property
  def best(self):
    return checkpoint_files.best_checkpoint(self.best_dir)
