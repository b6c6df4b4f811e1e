"""The one lock of a run directory (RunDir.lock): `RUN/train.lock` holds the owner's pid, its
start time and host. Training holds it while it runs; every other writer of the run's state
(the manifest's record of a checkpoint average) takes it for its write (RunDir.writing).

The lock file is created atomically (written aside, then hard-linked into place, which fails
if it exists). A second process finds it and stops with a one-line error naming the owner. A
lock left by a process that no longer runs on this host (killed with SIGKILL, a crash) is
stale: it is taken over with a warning. So is a lock whose pid now belongs to another process
(pids are reused): the process start time (Linux: /proc/PID/stat) tells them apart. A lock of
another host cannot be checked from here; the error says to delete the file once that process
is known to be gone.
"""

import json
import os
import socket
import time

from absl import logging

from nmt_tf.experiment.run_dir import LOCK_FILE, RunDirError

# The lock files this process holds: a writer of a run this process trains (the manifest's
# record of a checkpoint) goes on under the training's lock.
_HELD = set()


def start_time(pid):
  """When process `pid` started (clock ticks after boot, field 22 of /proc/PID/stat), or
  None where that cannot be read (another system, no such process)."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
      stat = f.read()
    return int(stat.rsplit(")", 1)[1].split()[19])  # the fields after the command's name
  except (OSError, ValueError, IndexError):
    return None


def _alive(pid):
  """Whether process `pid` exists on this host."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # it exists, under another user
  return True


def _reused(owner):
  """Whether the pid of a lock's record now belongs to a process that started after the
  owner did (False when either start time is unknown)."""
  recorded, now = owner.get("pid_start"), start_time(owner.get("pid"))
  return isinstance(recorded, int) and now is not None and now != recorded


class RunLock:
  """The training lock of a run directory.

  Args:
    run_path: the run directory (created if missing).
    report: called with a one-line warning when a stale lock is taken over.
  """

  def __init__(self, run_path, report=None):
    self.path = os.path.join(run_path, LOCK_FILE)
    self.report = report or (lambda text: logging.warning("%s", text))
    self.held = False

  def owner(self):
    """The lock's record ({"pid", "host", "started", "pid_start"}), {} if unreadable, None if
    absent."""
    try:
      with open(self.path, encoding="utf-8") as f:
        record = json.load(f)
      return record if isinstance(record, dict) else {}
    except FileNotFoundError:
      return None
    except (OSError, ValueError):
      return {}

  def held_here(self):
    """Whether this process holds the lock (through another RunLock of the same run)."""
    return self.path in _HELD

  def acquire(self):
    """Takes the lock; RunDirError when another live process holds it."""
    self._acquire()
    _HELD.add(self.path)
    return self

  def _acquire(self):
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": time.strftime("%Y-%m-%d %H:%M:%S"), "pid_start": start_time(os.getpid())}
    for _ in range(3):
      if self._create(me):
        self.held = True
        return self
      owner = self.owner()
      if owner is None:
        continue  # released in the meantime
      pid, host = owner.get("pid"), owner.get("host")
      if owner and host == me["host"] and pid == me["pid"]:
        self.held = True  # an earlier Trainer of this process: it trains no more
        return self
      if owner and host != me["host"]:
        raise RunDirError(
            f"{os.path.dirname(self.path)} is being trained by process {pid} on host {host} "
            f"(since {owner.get('started')}, {self.path}); wait for it to finish, or delete "
            "the lock file if that process is gone.")
      if owner and isinstance(pid, int) and _alive(pid) and not _reused(owner):
        raise RunDirError(
            f"{os.path.dirname(self.path)} is being trained by process {pid} on this host "
            f"(since {owner.get('started')}); wait for it to finish or stop it, and use "
            "another --run_dir to train something else at the same time.")
      if not owner and time.time() - os.path.getmtime(self.path) < 5:
        time.sleep(1)  # just created by another process, being written
        continue
      self.report(f"Taking over the lock {self.path} of process {pid} (since "
                  f"{owner.get('started')}), which no longer runs"
                  + (f" (pid {pid} is now another process)." if _reused(owner) else "."))
      try:
        os.remove(self.path)
      except FileNotFoundError:
        pass
    raise RunDirError(f"Could not take the lock {self.path}; check that no other process "
                      "trains this run directory, delete the file and rerun.")

  def _create(self, record):
    tmp = f"{self.path}.{record['pid']}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(record, f)
    try:
      os.link(tmp, self.path)
      return True
    except FileExistsError:
      return False
    finally:
      os.remove(tmp)

  def release(self):
    """Removes the lock if this process holds it."""
    if not self.held:
      return
    self.held = False
    _HELD.discard(self.path)
    owner = self.owner()
    if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
      try:
        os.remove(self.path)
      except FileNotFoundError:
        pass
