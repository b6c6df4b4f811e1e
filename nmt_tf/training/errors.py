"""Errors the trainer raises for the user (one line: what happened and the fix)."""

import errno

import tensorflow as tf


class TrainingError(RuntimeError):
  """Training stopped: a non-finite loss, an unusable checkpoint, a bad strategy setup."""


class NonFiniteLossError(TrainingError):
  """The loss became NaN or infinite: the training itself failed (exit code 1, where the
  errors a user can fix before starting exit with 2)."""


def disk_full(error):
  """Whether `error` is a write that failed for lack of disk space: an OSError with ENOSPC,
  or the ResourceExhaustedError (or other OpError) TensorFlow's file writers raise with the
  system's message."""
  if isinstance(error, OSError):
    return error.errno == errno.ENOSPC
  return isinstance(error, tf.errors.OpError) and "No space left on device" in error.message
