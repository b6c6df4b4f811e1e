"""Errors the trainer raises for the user (one line: what happened and the fix)."""


class TrainingError(RuntimeError):
  """Training stopped: a non-finite loss, an unusable checkpoint, a bad strategy setup."""


class NonFiniteLossError(TrainingError):
  """The loss became NaN or infinite: the training itself failed (exit code 1, where the
  errors a user can fix before starting exit with 2)."""
