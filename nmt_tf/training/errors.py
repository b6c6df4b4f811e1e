"""Errors the trainer raises for the user (one line: what happened and the fix)."""


class TrainingError(RuntimeError):
  """Training stopped: a non-finite loss, an unusable checkpoint, a bad strategy setup."""
