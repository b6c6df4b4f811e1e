"""The files of a checkpoint directory, read without trusting the `checkpoint` state file.

A directory written by tf.train.CheckpointManager holds `ckpt-N.index` + `ckpt-N.data-*` per
checkpoint and the small `checkpoint` state file that lists them. The state file can be
missing, empty or garbage (a copy that left it out, a full disk, a careless edit); the
checkpoints themselves are still on disk. These helpers find checkpoints from both, newest
first, and keep what a damaged run leaves behind (set-aside checkpoints, partial saves) visible:

  <dir>/ckpt-N.index, ckpt-N.data-*   a checkpoint (complete once its .index exists)
  <dir>/ckpt-N_temp/                  a save interrupted while writing (TensorFlow's staging
                                      directory): never a usable checkpoint
  <dir>/corrupt/                      checkpoints (and a state file) set aside as unusable;
                                      kept as evidence until the user deletes them
  best/score.json                     the validation BLEU and step best/'s model was saved with
"""

import glob
import json
import logging as py_logging
import os
import re
import shutil

from google.protobuf import text_format
import tensorflow as tf

from nmt_tf import write_path

STATE_FILE = "checkpoint"
SET_ASIDE_DIR = "corrupt"
BEST_SCORE_FILE = "score.json"
_CHECKPOINT_INDEX = re.compile(r"^(?P<prefix>.+)-(?P<step>\d+)\.index$")


def checkpoint_step(path):
  """The number N of a checkpoint prefix `.../ckpt-N` (-1 when it has none)."""
  match = re.search(r"-(\d+)$", path)
  return int(match.group(1)) if match else -1


def on_disk(directory):
  """Prefixes of the checkpoints whose .index file is in `directory`, oldest first."""
  found = []
  for index in glob.glob(os.path.join(glob.escape(directory), "*.index")):
    match = _CHECKPOINT_INDEX.match(os.path.basename(index))
    if match:
      found.append(index[:-len(".index")])
  return sorted(found, key=checkpoint_step)


def read_state(directory):
  """(paths listed by the state file, oldest first and its latest last, absolute; readable).

  `readable` is False when the state file exists but cannot be parsed (empty or garbage);
  paths is then empty. A missing state file is readable and lists nothing.
  """
  if not os.path.exists(os.path.join(directory, STATE_FILE)):
    return [], True
  tf_logger = py_logging.getLogger("tensorflow")
  level = tf_logger.level
  tf_logger.setLevel(py_logging.ERROR)  # TensorFlow warns twice per unparsable state file
  try:
    state = tf.train.get_checkpoint_state(directory)
  except (ValueError, tf.errors.OpError):
    state = None
  finally:
    tf_logger.setLevel(level)
  if state is None or not state.model_checkpoint_path:
    return [], False
  latest_path = state.model_checkpoint_path
  paths = [p for p in state.all_model_checkpoint_paths if p != latest_path] + [latest_path]
  return [p if os.path.isabs(p) else os.path.join(directory, p) for p in paths], True


def candidates(directory):
  """Every checkpoint of `directory` that may be usable, newest first: those the state file
  lists and those found on disk, each with its .index file present."""
  listed, _ = read_state(directory)
  paths = {os.path.normpath(p) for p in listed + on_disk(directory)}
  present = [p for p in paths if os.path.exists(p + ".index")]
  return sorted(present, key=checkpoint_step, reverse=True)


def latest(directory):
  """The checkpoint of `directory` with the highest step (state file or files), or None."""
  found = candidates(directory)
  return found[0] if found else None


def best_checkpoint(best_dir):
  """The model of best/: the state file's latest, else the one its score record names, else
  the highest step on disk; None when there is none."""
  listed, _ = read_state(best_dir)
  if listed and os.path.exists(listed[-1] + ".index"):
    return os.path.normpath(listed[-1])
  record = read_best_score(best_dir)
  if record is not None:
    path = os.path.join(best_dir, str(record.get("checkpoint", "")))
    if os.path.exists(path + ".index"):
      return path
  return latest(best_dir)


def read_best_score(best_dir):
  """The record of best/ ({"bleu", "step", "checkpoint", "metric"}), or None if there is none.

  Raises:
    ValueError: the record exists but cannot be read (its message names the file and fix).
  """
  path = os.path.join(best_dir, BEST_SCORE_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    float(record["bleu"])
    return record
  except (OSError, ValueError, KeyError, TypeError) as error:
    raise ValueError(f"{path} is unreadable ({type(error).__name__}: {error}); restore it, or "
                     "move best/ away if its model is not worth keeping.") from None


def write_state(directory, paths):
  """Rewrites the state file (atomically) to list `paths`, oldest first; the last is latest.

  Each entry gets its .index file's time as its timestamp, as CheckpointManager records
  them: a manager made afterwards manages (and in time deletes) these checkpoints.
  """
  relative = [os.path.relpath(p, directory) for p in paths]
  state = tf.compat.v1.train.generate_checkpoint_state_proto(
      directory, relative[-1], relative,
      all_model_checkpoint_timestamps=[os.path.getmtime(p + ".index") for p in paths],
      last_preserved_timestamp=0.0)
  write_path.write_text(os.path.join(directory, STATE_FILE),
                        text_format.MessageToString(state))


def set_aside(path):
  """Moves every file of checkpoint `path` into <dir>/corrupt/; returns the new prefix."""
  directory = os.path.dirname(path)
  target = os.path.join(directory, SET_ASIDE_DIR)
  os.makedirs(target, exist_ok=True)
  prefix, n = os.path.basename(path), 1
  while glob.glob(os.path.join(glob.escape(target), glob.escape(prefix) + ".*")):
    prefix, n = f"{os.path.basename(path)}~{n}", n + 1  # an earlier one of the same step
  for name in glob.glob(glob.escape(path) + ".*"):
    os.replace(name, os.path.join(target, prefix + name[len(path):]))
  return os.path.join(target, prefix)


def set_aside_state_file(directory):
  """Moves the state file into <dir>/corrupt/ (named checkpoint.<n> if one is there)."""
  source = os.path.join(directory, STATE_FILE)
  if not os.path.exists(source):
    return
  target = os.path.join(directory, SET_ASIDE_DIR)
  os.makedirs(target, exist_ok=True)
  name, n = os.path.join(target, STATE_FILE), 1
  while os.path.exists(name):
    name, n = os.path.join(target, f"{STATE_FILE}.{n}"), n + 1
  os.replace(source, name)


def set_aside_names(directory):
  """Names of the checkpoints in <dir>/corrupt/ (e.g. ['ckpt-20', 'ckpt-30'])."""
  found = {os.path.basename(p).split(".", 1)[0]
           for p in glob.glob(os.path.join(glob.escape(directory), SET_ASIDE_DIR, "*"))
           if os.path.basename(p).split(".", 1)[0] != STATE_FILE}
  return sorted(found)


def remove_partial_saves(directory):
  """Deletes the staging directories (<prefix>_temp*/) of saves interrupted while writing.

  Only call this while holding the run's lock: a running save of another process looks the
  same. Returns the names removed.
  """
  removed = []
  for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*_temp*"))):
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
      removed.append(os.path.basename(path))
  return removed
