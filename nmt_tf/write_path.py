"""The one way nmt_tf writes what a user keeps: files, folders, line outputs and checkpoints.

Every command goes through these functions, so that each write holds the same promises:

  - Staged, then renamed: a file or folder is written beside its target (a hidden name in the
    same folder) and renamed into place with os.replace, so a reader sees the old one or the
    whole new one, never half of it, however the writer stops.
  - Checked before the work (`check_output`, `check_folder`): an output equal to an input, a
    destination inside a run's model folders (best/, checkpoints/, export/: only the command
    that owns a folder writes there) or over the run's own files (config.json, vocab/, ...),
    inside an exported model, a model in the way, a destination that is a folder where a
    file is expected (or the reverse), a missing or read-only parent folder: each is a
    WriteError before anything is computed.
  - A write that fails anyway (a full disk) is one WriteError naming the path and the fix;
    the staged copy is removed, the target keeps its old content.
  - Line outputs (`LineOutput`) are written in order as they are produced; an interruption
    (an error, Ctrl-C, SIGTERM under `termination_as_interrupt`) keeps the lines written so
    far in `<path>.partial` and leaves `<path>` as it was.
  - Writers of one folder that must not interleave (two exports claiming a version) take
    `exclusive(folder)`, a lock the kernel releases when its process dies.

WriteError is a ValueError: the commands print it as their one `error:` line (exit code 2).
"""

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import stat
import sys
import threading
import time

EXPORTED_MODEL_FILES = ("saved_model.pb", "model.tflite")  # what makes a folder an export
PARTIAL_SUFFIX = ".partial"


class WriteError(ValueError):
  """A destination that cannot or must not be written; the message names it and the fix."""


def _staging_name(path, kind="tmp"):
  """A hidden name beside `path`, unique to this process and thread."""
  directory, name = os.path.split(os.path.abspath(path))
  return os.path.join(directory, f".{name}.{kind}-{os.getpid()}-{threading.get_ident()}")


def os_error(error, path, what="write"):
  """WriteError for an OSError met while writing `path`: a full disk, a read-only file
  system, a missing permission, each with its fix."""
  if error.errno == errno.ENOSPC or error.errno == errno.EDQUOT:
    fix = "free disk space there and rerun the same command"
    reason = "no space left on the device"
  elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
    fix = "choose a destination you may write, or fix its permissions"
    reason = error.strerror or "permission denied"
  else:
    fix = "check the destination and rerun"
    reason = error.strerror or type(error).__name__
  return WriteError(f"could not {what} {path}: {reason}; {fix}.")


def _disk_full(error):
  """Whether `error` (an OSError or a TensorFlow OpError) is a write that found no space."""
  if isinstance(error, OSError):
    return error.errno in (errno.ENOSPC, errno.EDQUOT)
  return "No space left on device" in str(error)


def write_bytes(path, data):
  """Writes a binary file atomically (see the module docstring); WriteError on failure. A
  symbolic link is written through: its target is replaced."""
  path = os.path.realpath(path) if os.path.islink(path) else path
  tmp = _staging_name(path)
  try:
    with open(tmp, "wb") as f:
      f.write(data)
    os.replace(tmp, path)
  except OSError as error:
    _remove(tmp)
    raise os_error(error, path) from None
  except BaseException:
    _remove(tmp)
    raise


def write_text(path, text):
  """Writes a UTF-8 text file atomically."""
  write_bytes(path, text.encode("utf-8"))


def write_json(path, values, compact=False):
  """Writes a JSON file atomically: indented with sorted keys, or on one line (compact) for
  large files such as sentence statistics. A value JSON cannot hold raises TypeError before
  anything is written."""
  write_text(path, json.dumps(values, separators=(",", ":")) if compact
             else json.dumps(values, indent=2, sort_keys=True))


def _remove(path):
  try:
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
      os.remove(path)
  except OSError:
    pass


def _run_layout():
  """The run directory's layout (experiment/run_dir.py names its files and folders),
  imported on first use: the run directory module imports this one."""
  from nmt_tf.experiment import run_dir  # pylint: disable=import-outside-toplevel
  return run_dir


def model_folder(path):
  """(run directory, folder name) when `path` is or lies inside a model folder of a run
  directory (RUN/best, RUN/checkpoints, RUN/export), else None."""
  layout = _run_layout()
  path = os.path.realpath(path)
  child = None
  while True:
    parent = os.path.dirname(path)
    if child is not None and os.path.basename(child) in layout.MODEL_FOLDERS and os.path.isfile(
        os.path.join(path, layout.CONFIG_FILE)):
      return path, os.path.basename(child)
    if parent == path:
      return None
    child, path = path, parent


def holds_model(path):
  """What model `path` holds: 'a checkpoint' (a prefix with its .index), 'a SavedModel', 'a
  LiteRT model', or None."""
  if os.path.exists(path + ".index"):
    return "a checkpoint"
  if os.path.isfile(os.path.join(path, "saved_model.pb")):
    return "a SavedModel"
  if os.path.isfile(path) and path.endswith(".tflite"):
    return "a LiteRT model"
  return None


def _same_file(a, b):
  if os.path.realpath(a) == os.path.realpath(b):
    return True
  try:
    return os.path.samefile(a, b)
  except OSError:
    return False


def _run_file(path):
  """(run directory, name) when `path` is or lies inside one of the files of a run that its
  models are loaded or trained with (run_dir.RUN_FILES)."""
  layout = _run_layout()
  path = os.path.realpath(path)
  while True:
    parent = os.path.dirname(path)
    if parent == path:
      return None
    if os.path.basename(path) in layout.RUN_FILES and os.path.isfile(
        os.path.join(parent, layout.CONFIG_FILE)):
      return parent, os.path.basename(path)
    path = parent


def _model_around(path):
  """The folder of an exported model (a SavedModel, a LiteRT export) that contains `path`
  (or is it), else None."""
  path = os.path.realpath(path)
  while True:
    if any(os.path.isfile(os.path.join(path, name)) for name in EXPORTED_MODEL_FILES):
      return path
    parent = os.path.dirname(path)
    if parent == path:
      return None
    path = parent


def _check_protected(path, flag, owner, inside=False):
  """WriteError when `path` (a file, or with `inside` a folder to write in) belongs to a run's
  models or files, or lies inside a SavedModel."""
  probe = os.path.join(path, "x") if inside else path
  folders = _run_layout().MODEL_FOLDERS
  found = model_folder(probe)
  if found is not None and folders[found[1]] != owner:
    run, folder = found
    raise WriteError(
        f"{flag}={path} is inside {os.path.join(run, folder)}, which holds the run's models "
        f"(written by `nmt-tf {folders[folder]}` only); choose a path outside best/, "
        "checkpoints/ and export/.")
  found = _run_file(probe)
  if found is not None and owner != "train":
    run, name = found
    raise WriteError(f"{flag}={path} would write over {os.path.join(run, name)}, which the "
                     "run's models are loaded with (written by `nmt-tf train` only); choose a "
                     "path outside the run's files.")
  model = _model_around(probe)
  if model is not None:
    raise WriteError(f"{flag}={path} is inside {model}, an exported model, which no command "
                     "changes; choose a path outside it.")


def _check_parent(path, flag, create):
  parent = os.path.dirname(os.path.abspath(path))
  while create and not os.path.exists(parent):
    parent = os.path.dirname(parent)  # created by the command: its first existing ancestor
  if not os.path.isdir(parent):
    raise WriteError(f"{flag}={path}: the folder {parent} does not exist; create it or choose "
                     "another path.")
  if not os.access(parent, os.W_OK | os.X_OK):
    raise WriteError(f"{flag}={path}: the folder {parent} is not writable; choose a "
                     "destination you may write, or fix its permissions.")


def check_output(path, flag="--output_file", inputs=(), owner=None, replace_model=False,
                 create_parent=False):
  """Refuses, before any work, a file destination that must not or cannot be written.

  Args:
    path: the file (or checkpoint prefix) to write.
    flag: how the user named it, for the message ("--output_file").
    inputs: paths the command reads: the output may be none of them.
    owner: the command writing, which may write into the model folders it owns
      (run_dir.MODEL_FOLDERS: "train", "export"); None for any other.
    replace_model: a model at `path` is an earlier output of the same command, which it may
      replace (an average over an earlier average).
    create_parent: the command creates a missing parent folder (else it is an error).

  Raises:
    WriteError: naming the path and the fix.
  """
  for source in inputs:
    if source and source != "-" and os.path.exists(source) and os.path.exists(path) and \
        _same_file(path, source):
      raise WriteError(f"{flag}={path} is also an input of the command ({source}); it would be "
                       "overwritten by its own results: write to another file.")
  _check_protected(path, flag, owner)
  if os.path.isdir(path):
    example = os.path.join(path, "out.txt")
    raise WriteError(f"{flag}={path} is a folder; name a file (such as {example}).")
  held = holds_model(path)
  if held and not replace_model:
    raise WriteError(f"{flag}={path} holds {held}, which this command never overwrites; "
                     "choose a new path.")
  _check_parent(path, flag, create=create_parent)
  _probe_device(path, flag)


# Character devices (major, minor) that a one-byte write leaves as they were, so that it may
# test them: Linux's /dev/null, /dev/zero and /dev/full (which refuses every write).
_PROBED_DEVICES = {(1, 3), (1, 5), (1, 7)}


def _probe_device(path, flag):
  """WriteError naming `flag` when `path` is a device of _PROBED_DEVICES that refuses a
  write (/dev/full): found before the command's work rather than at its first output line.
  Other devices, pipes and terminals are not probed: a probe would reach their reader."""
  try:
    info = os.stat(path)
  except OSError:
    return
  if not stat.S_ISCHR(info.st_mode) or \
      (os.major(info.st_rdev), os.minor(info.st_rdev)) not in _PROBED_DEVICES:
    return
  try:
    descriptor = os.open(path, os.O_WRONLY)
    try:
      os.write(descriptor, b"\n")
    finally:
      os.close(descriptor)
  except OSError as error:
    raise WriteError(f"{flag}={path} cannot be written ({error.strerror or error}); choose "
                     "another destination.") from None


def check_folder(path, flag, owner=None, inputs=()):
  """Refuses, before any work, a folder destination (created if missing) that is a file,
  lies inside a run's model folders it does not own, or cannot be created; as check_output."""
  for source in inputs:
    if source and os.path.exists(source) and os.path.exists(path) and _same_file(path, source):
      raise WriteError(f"{flag}={path} is also an input of the command; choose another folder.")
  _check_protected(path, flag, owner, inside=True)
  if os.path.exists(path) and not os.path.isdir(path):
    raise WriteError(f"{flag}={path} is a file, not a folder; name a folder (it is created "
                     "if missing).")
  _check_parent(os.path.join(path, "x"), flag, create=True)


def make_folder(path, flag=None):
  """os.makedirs(path, exist_ok=True) as a WriteError naming the folder."""
  try:
    os.makedirs(path, exist_ok=True)
  except FileExistsError:
    raise WriteError(f"{(flag + '=') if flag else ''}{path} is a file, not a folder; name a "
                     "folder (it is created if missing).") from None
  except OSError as error:
    raise os_error(error, path, "create the folder") from None


@contextlib.contextmanager
def staged_folder(path):
  """Yields a hidden folder beside `path` to write a folder's files in; renamed to `path`
  (which must not exist) when the block ends without error and no stop was requested
  (`stop_requested`: TensorFlow may swallow the KeyboardInterrupt of Ctrl-C or SIGTERM),
  else removed.

  Raises:
    WriteError: `path` exists, or a write inside it failed for lack of space.
  """
  if os.path.exists(path):
    raise WriteError(f"{path} already exists; choose another destination.")
  tmp = _staging_name(path)
  make_folder(os.path.dirname(os.path.abspath(path)))
  try:
    os.makedirs(tmp)
    yield tmp
    if stop_requested():  # a stop that TensorFlow swallowed inside the block
      raise Interrupted()
    os.rename(tmp, path)
  except WriteError as error:  # a file inside: named by the folder that was to appear
    _remove(tmp)
    raise WriteError(str(error).replace(tmp, path)) from None
  except OSError as error:
    _remove(tmp)
    raise os_error(error, path) from None
  except Exception as error:  # pylint: disable=broad-except  # TensorFlow's OpError
    _remove(tmp)
    if _disk_full(error):
      raise WriteError(f"could not write {path}: no space left on the device; free disk "
                       "space there and rerun the same command.") from None
    raise
  except BaseException:
    _remove(tmp)
    raise


def write_checkpoint(checkpoint, prefix):
  """checkpoint.write(prefix) staged: the files are written under a hidden prefix in the same
  folder, then renamed to `prefix.*` (the .index last, which makes it a checkpoint). Returns
  the prefix; WriteError on a full disk (nothing of the new checkpoint is left)."""
  import glob  # pylint: disable=import-outside-toplevel
  tmp = _staging_name(prefix, "ckpt")
  make_folder(os.path.dirname(os.path.abspath(prefix)))
  written = []
  try:
    checkpoint.write(tmp)
    written = glob.glob(glob.escape(tmp) + ".*")
    for name in sorted(written, key=lambda n: n.endswith(".index")):
      os.replace(name, prefix + name[len(tmp):])
  except Exception as error:  # pylint: disable=broad-except
    for name in glob.glob(glob.escape(tmp) + "*"):
      _remove(name)
    if _disk_full(error):
      raise WriteError(f"could not write the checkpoint {prefix}: no space left on the "
                       "device; free disk space there and rerun the same command.") from None
    if isinstance(error, OSError):
      raise os_error(error, prefix) from None
    raise
  return prefix


class LineOutput:
  """A text output written line by line, in order: stdout for '-', else a file.

  A file is written to `<path>.partial` and renamed to `<path>` by `commit`; what `close`
  finds uncommitted (an error or an interruption came first) stays in `<path>.partial`, and
  `<path>` keeps its old content. Use as a context manager:

    with LineOutput(path) as out:
      for line in lines: out.write(line)
      out.commit()
  """

  def __init__(self, path, stdout=None):
    self.path = path
    self.lines = 0
    if path == "-":
      self.partial, self._file = None, stdout
    elif os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
      # A device or a named pipe (/dev/stdout, a shell's <(...)): written as it goes.
      self.partial = None
      try:
        self._file = open(path, "w", encoding="utf-8")
      except OSError as error:
        raise os_error(error, path) from None
    else:
      self.path = path = os.path.realpath(path) if os.path.islink(path) else path
      self.partial = path + PARTIAL_SUFFIX
      try:
        self._file = open(self.partial, "w", encoding="utf-8")
      except OSError as error:
        raise os_error(error, self.partial) from None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
    return False

  def write(self, line):
    """Writes one line (the newline is added) and flushes it; a stop asked for before it
    (`stop_requested`) raises Interrupted instead."""
    if stop_requested():
      raise Interrupted()
    try:
      self._out().write(line + "\n")
      self._out().flush()
    except OSError as error:
      raise os_error(error, self.partial or ("stdout" if self.path == "-" else self.path)
                     ) from None
    self.lines += 1

  def _out(self):
    return sys.stdout if self._file is None else self._file

  def commit(self):
    """Ends the output: the file is renamed into place."""
    if self.partial is None:
      if self._file is not None and self._file is not sys.stdout:
        self._file.close()
      return
    try:
      self._file.close()
      os.replace(self.partial, self.path)
    except OSError as error:
      raise os_error(error, self.path) from None
    self.partial = None

  def close(self):
    if self._file is not None and self._file is not sys.stdout and not self._file.closed:
      try:
        self._file.close()
      except OSError:  # what a full disk left in the buffer; the write already said so
        pass

  def kept(self):
    """Where the lines written so far are when the output was not committed: None for
    stdout or a committed file."""
    return self.partial

  def stop(self):
    """Ends an output that an error or an interruption cut short: closes it and returns the
    number of whole lines it holds. An interruption may land between a line's write and its
    count, or inside a write, so a kept file is recounted and any torn last line dropped.
    """
    self.close()
    if self.partial is None or not os.path.isfile(self.partial):
      return self.lines
    try:
      with open(self.partial, "r+b") as f:
        data = f.read()
        whole = data.rfind(b"\n") + 1
        if whole < len(data):
          f.truncate(whole)
    except OSError:
      return self.lines
    self.lines = data.count(b"\n", 0, whole)
    return self.lines


class Interrupted(KeyboardInterrupt):
  """SIGTERM, raised where the process was (see termination_as_interrupt)."""


# Whether Ctrl-C or SIGTERM has asked this process to stop (signals are per process), and the
# console's stderr of before. The KeyboardInterrupt a handler raises can land inside
# TensorFlow, which may swallow it, turn it into another error or print its own traceback;
# the request is not lost, and what is printed while the command unwinds goes nowhere: the
# command's one line (`report_stop`) is what the console shows.
_stop = {"requested": False, "stderr": None}


def stop_requested():
  """Whether Ctrl-C or SIGTERM has asked this process to stop (see termination_as_interrupt)."""
  return _stop["requested"]


def report_stop(text):
  """Prints the one line of a stopped command on the console's stderr."""
  print(text, file=_stop["stderr"] or sys.stderr)


def _silence_stderr():
  """From the first stop on, sys.stderr goes nowhere until termination_as_interrupt ends."""
  if _stop["stderr"] is None:
    _stop["stderr"] = sys.stderr
    sys.stderr = open(os.devnull, "w", encoding="utf-8")  # pylint: disable=consider-using-with


@contextlib.contextmanager
def termination_as_interrupt():
  """Within the block, SIGTERM raises Interrupted (a KeyboardInterrupt) as Ctrl-C does, so
  that the same cleanup runs: a LineOutput keeps what was written. Both are also recorded
  (`stop_requested`), so that a LineOutput stops at its next line even where TensorFlow
  swallowed the exception. A Ctrl-C that the parent made this process ignore stays ignored."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def handler(signum, frame):  # pylint: disable=unused-argument
    _stop["requested"] = True
    _silence_stderr()
    raise KeyboardInterrupt() if signum == signal.SIGINT else Interrupted()

  previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, handler)}
  if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, handler)
  try:
    yield
  finally:
    for signum, before in previous.items():
      signal.signal(signum, before)
    _stop["requested"] = False  # the request was this block's
    if _stop["stderr"] is not None:
      sys.stderr.close()
      sys.stderr, _stop["stderr"] = _stop["stderr"], None


LOCK_FILE = ".lock"


@contextlib.contextmanager
def exclusive(directory, what, report=None, name=LOCK_FILE):
  """Holds the lock of `directory` (created if missing) for the block: one writer at a time.

  The lock is `directory/.lock` (or `name`), taken with flock: the kernel releases it when its process
  ends, however it ends, so a lock is never left behind. A second writer waits for the first,
  saying so once through `report`.

  Args:
    directory: the folder whose contents the writers change.
    what: what the writer does, for the message ("an export of runs/a/export/nmt").
    report: called with a one-line note when the lock is held by another process.
    name: the lock file's name in `directory`.
  """
  make_folder(directory)
  path = os.path.join(directory, name)
  try:
    handle = open(path, "a+", encoding="utf-8")
  except OSError as error:
    raise os_error(error, path, "create the lock") from None
  try:
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      if report:
        report(f"waiting for {what} of another process ({path}) to finish")
      start = time.time()
      fcntl.flock(handle, fcntl.LOCK_EX)
      if report:
        report(f"... waited {time.time() - start:.0f} s")
    yield
  finally:
    handle.close()  # releases the lock
