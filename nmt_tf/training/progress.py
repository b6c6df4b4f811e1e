"""Console progress: step, loss, tokens/s and ETA on one line.

On a terminal the line is rewritten in place (at most every `min_interval` seconds); when
stdout is not a terminal (a log file, CI) one line is printed every `log_every` steps instead.
"""

import sys
import time


def _duration(seconds):
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else \
      f"{rest // 60:d}:{rest % 60:02d}"


class ProgressPrinter:
  """Prints training progress (see module docstring).

  Args:
    total_steps: the run's last step.
    log_every: steps between lines when not on a terminal.
    stream: output stream (default sys.stdout).
    min_interval: seconds between redraws on a terminal.
    deadline: optional time.time() at which a time budget ends; the ETA is the earlier end.
  """

  def __init__(self, total_steps, log_every, stream=None, min_interval=0.2, deadline=None):
    self.total_steps = total_steps
    self.deadline = deadline
    self.log_every = log_every
    self.stream = stream or sys.stdout
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.min_interval = min_interval
    self._last_draw = 0.0
    self._start_time = None
    self._start_step = None
    self._line_open = False

  def update(self, step, loss, tokens_per_sec, force=False):
    """Reports that `step` is done."""
    now = time.time()
    if self._start_time is None:
      self._start_time, self._start_step = now, step - 1
    done = step - self._start_step
    rate = done / max(now - self._start_time, 1e-6)
    eta = (self.total_steps - step) / max(rate, 1e-9)
    if self.deadline is not None:
      eta = min(eta, self.deadline - now)
    line = (f"step {step}/{self.total_steps}  loss {loss:.4f}  {tokens_per_sec:,.0f} tok/s  "
            f"ETA {_duration(eta)}")
    if self.tty:
      if force or now - self._last_draw >= self.min_interval or step == self.total_steps:
        self.stream.write("\r" + line.ljust(78))
        self.stream.flush()
        self._line_open = True
        self._last_draw = now
    elif force or step % self.log_every == 0 or step == self.total_steps:
      self.stream.write(line + "\n")
      self.stream.flush()

  def message(self, text):
    """Prints a full line (validation results...) without breaking the progress line."""
    if self._line_open:
      self.stream.write("\n")
      self._line_open = False
    self.stream.write(text + "\n")
    self.stream.flush()

  def close(self):
    if self._line_open:
      self.stream.write("\n")
      self.stream.flush()
      self._line_open = False
