"""Fault injection for the kill-and-resume tests: SIGKILL this process at a named point.

  NMT_TF_KILL_AT=save@30         after ckpt-30's files are written, before the state file
                                 names them (a kill in the middle of a checkpoint save)
  NMT_TF_KILL_AT=validation@40   in the validation of step 40, after decoding, before best/
  NMT_TF_KILL_AT=best@40         after best/ got step 40's model, before its score is recorded

Unset (the normal case), `point` does nothing but read one environment variable.
"""

import os
import signal

ENV_VAR = "NMT_TF_KILL_AT"


def point(name, step):
  """Kills the process with SIGKILL if NMT_TF_KILL_AT is `name@step`."""
  if os.environ.get(ENV_VAR) == f"{name}@{step}":
    os.kill(os.getpid(), signal.SIGKILL)
