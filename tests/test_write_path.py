"""nmt_tf.write_path, the one way the package writes what users keep: its parts, then the
commands that write through it (average, translate, score, evaluate, export in both formats)
as users run them, with hostile destinations, interruptions, a full disk and two writers."""

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from unittest import mock

import pytest
import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.cli import average as average_cli
from nmt_tf.cli import evaluate as evaluate_cli
from nmt_tf.cli import export as export_cli
from nmt_tf.cli import score as score_cli
from nmt_tf.cli import translate as translate_cli
from nmt_tf.experiment import checkpoint_files
from nmt_tf.write_path import write_json, write_text, WriteError
from tests.run_fixtures import make_tiny_run
from tests.test_cli_decode import run_command
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def full_disk(test, free=4096):
  """A folder on a file system of its own (tmpfs) with only `free` bytes left: a write of
  more fails with ENOSPC. Needs root (CI runs as root); skipped elsewhere."""
  if os.geteuid() != 0:
    test.skipTest("mounting a small file system needs root")
  mount = tempfile.mkdtemp()
  if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount],
                    capture_output=True, check=False).returncode != 0:
    test.skipTest("tmpfs cannot be mounted here")
  try:
    stat = os.statvfs(mount)
    with open(os.path.join(mount, "filler"), "wb") as f:
      f.write(b"\0" * (stat.f_bavail * stat.f_frsize - free))
    yield mount
  finally:
    subprocess.run(["umount", mount], check=False)


def files_below(directory):
  """Every path below `directory`, relative to it."""
  return sorted(os.path.relpath(os.path.join(d, name), directory)
                for d, dirs, names in os.walk(directory) for name in dirs + names)


def digest(directory):
  """{relative path: bytes} of the files below `directory`."""
  found = {}
  for path in glob.glob(os.path.join(directory, "**"), recursive=True):
    if os.path.isfile(path):
      with open(path, "rb") as f:
        found[os.path.relpath(path, directory)] = f.read()
  return found


class AtomicWriteTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = tempfile.mkdtemp()
    self.path = os.path.join(self.dir, "report.json")

  def read(self):
    with open(self.path, encoding="utf-8") as f:
      return f.read()

  def test_text_replaces_the_file_and_leaves_no_temporary(self):
    write_text(self.path, "old\n")
    write_text(self.path, "new ü\n")
    self.assertEqual(self.read(), "new ü\n")
    self.assertEqual(os.listdir(self.dir), ["report.json"])

  def test_json_formats(self):
    values = {"b": [1, 2], "a": 0.5}
    write_json(self.path, values)
    self.assertEqual(self.read(), json.dumps(values, indent=2, sort_keys=True))
    write_json(self.path, values, compact=True)  # one line, keys in their order
    self.assertEqual(self.read(), '{"b":[1,2],"a":0.5}')

  def test_a_value_that_cannot_be_written_keeps_the_old_file(self):
    write_json(self.path, {"steps": 10})
    with self.assertRaises(TypeError):
      write_json(self.path, {"steps": object()})
    self.assertEqual(json.loads(self.read()), {"steps": 10})
    self.assertEqual(os.listdir(self.dir), ["report.json"])


  def test_a_full_disk_is_one_error_naming_the_file_and_keeps_the_old_one(self):
    with full_disk(self) as mount:
      path = os.path.join(mount, "report.json")
      write_json(path, {"steps": 1})
      with self.assertRaisesRegex(WriteError, f"^could not write {path}: no space left on the "
                                  "device; free disk space there and rerun the same command"):
        write_text(path, "x" * 100_000)
      self.assertEqual(json.loads(open(path, encoding="utf-8").read()), {"steps": 1})
      self.assertEqual(sorted(os.listdir(mount)), ["filler", "report.json"])


class DestinationCheckTest(tf.test.TestCase):
  """write_path.check_output / check_folder: refused before any work."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.rundir, _, _ = make_tiny_run(os.path.join(tempfile.mkdtemp(), "run"))

  def test_a_device_that_refuses_writes_is_found_first(self):
    if not os.path.exists("/dev/full"):
      self.skipTest("no /dev/full")
    with self.assertRaisesRegex(WriteError, r"^--output_file=/dev/full cannot be written "
                                r"\(No space left on device\); choose another destination\.$"):
      write_path.check_output("/dev/full")
    write_path.check_output("/dev/null")  # takes the probe and keeps nothing
    with mock.patch.object(translate_cli, "build_translator",
                           side_effect=AssertionError("loaded the model")):
      code, out, err = run_command(translate_cli, "the boy\n", run_dir=self.rundir.path,
                                   output_file="/dev/full")
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err, "error: --output_file=/dev/full cannot be written (No space left on "
                     "device); choose another destination.\n")

  def test_an_output_that_is_an_input_a_folder_or_without_parent(self):
    source = os.path.join(self.get_temp_dir(), "in.txt")
    write_text(source, "a\n")
    link = os.path.join(self.get_temp_dir(), "link.txt")
    if not os.path.exists(link):
      os.symlink(source, link)
    for output in (source, link):
      with self.assertRaisesRegex(WriteError, "is also an input of the command"):
        write_path.check_output(output, inputs=[source])
    with self.assertRaisesRegex(WriteError, "is a folder; name a file"):
      write_path.check_output(self.get_temp_dir())
    with self.assertRaisesRegex(WriteError, "the folder .*/missing does not exist"):
      write_path.check_output(os.path.join(self.get_temp_dir(), "missing", "out.txt"))
    write_path.check_output(os.path.join(self.get_temp_dir(), "new.txt"), inputs=[source])
    with self.assertRaisesRegex(WriteError, "is a file, not a folder"):
      write_path.check_folder(source, "--eval_dir")

  def test_the_model_folders_of_a_run_belong_to_their_commands(self):
    for folder in ("best", "checkpoints", "export"):
      for path in (os.path.join(self.rundir.path, folder, "out.txt"),
                   os.path.join(self.rundir.path, folder, "sub", "deeper", "ckpt-avg")):
        with self.assertRaisesRegex(WriteError, f"inside {self.rundir.path}/{folder}, which holds "
                                    "the run's models"):
          write_path.check_output(path, create_parent=True)
    write_path.check_folder(os.path.join(self.rundir.export_dir, "nmt"), "--export_dir",
                            owner="export")
    with self.assertRaisesRegex(WriteError, "inside .*/best"):
      write_path.check_folder(self.rundir.best_dir, "--export_dir", owner="export")
    for name in ("config.json", "manifest.json", "vocab/source.vocab", "vocab/new.txt"):
      with self.assertRaisesRegex(WriteError, "which the run's models are loaded with \\(written "
                                  "by `nmt-tf train` only\\)"):
        write_path.check_output(os.path.join(self.rundir.path, name))
    write_path.check_output(os.path.join(self.rundir.path, "out.txt"))
    export = os.path.join(self.get_temp_dir(), "nmt", "1")
    os.makedirs(export, exist_ok=True)
    write_text(os.path.join(export, "saved_model.pb"), "")
    with self.assertRaisesRegex(WriteError, f"inside {export}, an exported model"):
      write_path.check_folder(os.path.join(export, "nmt"), "--export_dir", owner="export")
    best = checkpoint_files.best_checkpoint(self.rundir.best_dir)
    copy = os.path.join(self.get_temp_dir(), "copy")
    for name in glob.glob(best + ".*"):
      shutil.copy(name, copy + name[len(best):])
    with self.assertRaisesRegex(WriteError, "holds a checkpoint, which this command never "
                                "overwrites"):
      write_path.check_output(copy, "--average_output")


class StagedWritesTest(tf.test.TestCase):

  def test_a_folder_appears_whole_or_not_at_all(self):
    target = os.path.join(self.get_temp_dir(), "models", "1")
    with self.assertRaises(RuntimeError):
      with write_path.staged_folder(target) as tmp:
        write_text(os.path.join(tmp, "a.txt"), "a")
        raise RuntimeError("stopped")
    self.assertEqual(os.listdir(os.path.dirname(target)), [])
    with write_path.staged_folder(target) as tmp:
      write_text(os.path.join(tmp, "a.txt"), "a")
      self.assertFalse(os.path.exists(target))
    self.assertEqual(os.listdir(target), ["a.txt"])
    with self.assertRaisesRegex(WriteError, "already exists"):
      with write_path.staged_folder(target):
        pass

  def test_line_output_keeps_what_an_interruption_leaves(self):
    path = os.path.join(self.get_temp_dir(), "out.txt")
    write_text(path, "old\n")
    with self.assertRaises(KeyboardInterrupt):
      with write_path.LineOutput(path) as out:
        out.write("one")
        out.write("two")
        raise KeyboardInterrupt
    self.assertEqual(open(path, encoding="utf-8").read(), "old\n")
    self.assertEqual(open(out.kept(), encoding="utf-8").read(), "one\ntwo\n")
    with write_path.LineOutput(path) as out:
      out.write("new")
      out.commit()
    self.assertEqual(open(path, encoding="utf-8").read(), "new\n")
    self.assertIsNone(out.kept())

  def test_a_stopped_line_output_counts_the_whole_lines_it_kept(self):
    # An interruption between a line's write and its count, or inside a write.
    path = os.path.join(self.get_temp_dir(), "stopped.txt")
    with write_path.LineOutput(path) as out:
      out.write("one")
      out._out().write("two\nthr")
      self.assertEqual(out.stop(), 2)
    self.assertEqual(open(out.kept(), encoding="utf-8").read(), "one\ntwo\n")
    self.assertFalse(os.path.exists(path))

  def test_a_stop_that_tensorflow_swallowed_still_stops_the_output(self):
    # In a process of its own: the signal goes to that process's main thread.
    path = os.path.join(self.get_temp_dir(), "swallowed.txt")
    script = f"""
import os, signal, sys, time
from nmt_tf import write_path
with write_path.termination_as_interrupt(), write_path.LineOutput({path!r}) as out:
  out.write("one")
  try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
  except KeyboardInterrupt:
    pass  # as an op that drops the exception or turns it into its own error
  print(write_path.stop_requested())
  print("a traceback TensorFlow prints while it unwinds", file=sys.stderr)
  try:
    out.write("two")
  except KeyboardInterrupt:
    write_path.report_stop("stopped")
print(write_path.stop_requested())
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(done.stdout.split(), ["True", "False"], done.stderr)
    self.assertEqual(done.stderr, "stopped\n")  # the command's line, nothing printed before
    self.assertEqual(open(path + ".partial", encoding="utf-8").read(), "one\n")

  def test_a_folder_whose_stop_tensorflow_swallowed_does_not_appear(self):
    # As an export whose SIGTERM landed in tf.saved_model.save and was dropped there.
    target = os.path.join(self.get_temp_dir(), "swallowed", "1")
    script = f"""
import os, signal, time
from nmt_tf import write_path
with write_path.termination_as_interrupt():
  try:
    with write_path.staged_folder({target!r}) as tmp:
      write_path.write_text(os.path.join(tmp, "a.txt"), "a")
      try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
      except KeyboardInterrupt:
        pass
    print("renamed")
  except KeyboardInterrupt:
    print("stopped")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(done.stdout.split(), ["stopped"], done.stderr)
    self.assertEqual(os.listdir(os.path.dirname(target)), [])

  def test_a_link_is_written_through_and_a_pipe_as_it_goes(self):
    target = os.path.join(self.get_temp_dir(), "target.txt")
    link = os.path.join(self.get_temp_dir(), "link.txt")
    write_text(target, "old\n")
    os.symlink(target, link)
    with write_path.LineOutput(link) as out:
      out.write("new")
      out.commit()
    self.assertTrue(os.path.islink(link))
    self.assertEqual(open(target, encoding="utf-8").read(), "new\n")
    write_text(link, "newer\n")
    self.assertTrue(os.path.islink(link))
    self.assertEqual(open(target, encoding="utf-8").read(), "newer\n")
    fifo = os.path.join(self.get_temp_dir(), "fifo")
    os.mkfifo(fifo)
    read = []
    reader = threading.Thread(target=lambda: read.append(open(fifo, encoding="utf-8").read()))
    reader.start()
    with write_path.LineOutput(fifo) as out:
      out.write("through the pipe")
      out.commit()
    reader.join(timeout=SAFETY_NET)
    self.assertEqual(read, ["through the pipe\n"])
    self.assertFalse(os.path.exists(fifo + ".partial"))

  def test_exclusive_lets_one_writer_in_at_a_time(self):
    directory, inside, notes = self.get_temp_dir(), [], []

    def writer(name):
      with write_path.exclusive(directory, "a test write", notes.append):
        inside.append(("in", name))
        time.sleep(0.3)
        inside.append(("out", name))

    threads = [threading.Thread(target=writer, args=(n,)) for n in "ab"]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    self.assertEqual([kind for kind, _ in inside], ["in", "out", "in", "out"])
    self.assertStartsWith(notes[0], "waiting for a test write of another process")


@pytest.mark.slow  # commands on a run, some as processes
class CommandsWriteSafelyTest(tf.test.TestCase):
  """Every command that writes refuses a destination it must not write before any work,
  writes staged, and fails on a full disk with one line and nothing half-written."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.rundir, cls.config, _ = make_tiny_run(os.path.join(cls.tmp, "run"))
    cls.input = os.path.join(cls.tmp, "in.txt")
    write_text(cls.input, "the boy helps the king\nthe lion meets the boy\n")

  def error_line(self, module, **flags):
    code, out, err = run_command(module, run_dir=self.rundir.path, **flags)
    self.assertEqual(code, 2, err)
    self.assertEqual(out, "")
    lines = err.strip().splitlines()
    self.assertLen(lines, 1, err)
    self.assertStartsWith(lines[0], "error: ")
    return lines[0]

  def test_average_never_writes_over_the_models_of_the_run(self):
    best = checkpoint_files.best_checkpoint(self.rundir.best_dir)
    before = digest(self.rundir.path)
    for output in (best, os.path.join(self.rundir.best_dir, "ckpt-avg"),
                   os.path.join(self.rundir.checkpoint_dir, "ckpt-99"),
                   os.path.join(self.rundir.export_dir, "avg")):
      self.assertRegex(self.error_line(average_cli, average_last=1, average_output=output),
                       "which holds the run's models")
    self.assertEqual(digest(self.rundir.path), before)
    self.assertRegex(self.error_line(average_cli, average_last=1,
                                     average_output=checkpoint_files.latest(
                                         self.rundir.checkpoint_dir)),
                     "is one of the checkpoints averaged")
    other = os.path.join(self.tmp, "avg_other")
    for _ in range(2):  # an earlier average is replaced by the next
      code, out, err = run_command(average_cli, run_dir=self.rundir.path, average_last=1,
                                   average_output=other)
      self.assertEqual(code, 0, err)
    self.assertEqual(sorted(os.listdir(self.tmp)).count("avg_other.index"), 1)

  def test_translate_and_score_refuse_to_write_over_their_input(self):
    with open(self.input, "rb") as f:
      before = f.read()
    self.assertRegex(self.error_line(translate_cli, input_file=self.input,
                                     output_file=self.input), "is also an input")
    self.assertRegex(self.error_line(score_cli, source_file=self.input, target_file=self.input,
                                     score_output=self.input), "is also an input")
    with open(self.input, "rb") as f:
      self.assertEqual(f.read(), before)
    self.assertRegex(self.error_line(translate_cli, input_file=self.input,
                                     output_file=self.tmp), "is a folder; name a file")
    self.assertRegex(self.error_line(translate_cli, input_file=self.input,
                                     output_file=os.path.join(self.rundir.best_dir, "out.txt")),
                     "holds the run's models")
    self.assertRegex(self.error_line(evaluate_cli, source_file=self.input,
                                     reference_file=self.input, eval_dir=self.input),
                     "is also an input")
    other = os.path.join(self.tmp, "a_file")
    write_text(other, "")
    self.assertRegex(self.error_line(evaluate_cli, source_file=self.input,
                                     reference_file=self.input, eval_dir=other),
                     "is a file, not a folder")

  def test_export_destinations_are_checked_before_the_export(self):
    self.assertRegex(self.error_line(export_cli, export_dir=self.input),
                     f"^error: --export_dir={self.input} is a file, not a folder")
    self.assertRegex(self.error_line(export_cli, export_dir=self.rundir.best_dir),
                     "holds the run's models")
    self.assertRegex(self.error_line(export_cli, export_quantization="int8"),
                     "--export_quantization=int8 applies to --format=litert only")
    self.assertFalse(os.path.exists(self.rundir.export_dir))

  def test_a_full_disk_is_one_line_naming_the_destination_and_leaves_nothing(self):
    with full_disk(self) as mount:
      for module, flags, target in (
          (export_cli, dict(export_dir=mount, export_warmup=False), "nmt/1"),
          (export_cli, dict(export_dir=mount, format="litert"), "nmt_litert/1"),
          (average_cli, dict(average_last=1, average_output=os.path.join(mount, "avg")),
           "avg"),
          (translate_cli, dict(input_file=self.input, beam_size=1,
                               output_file=os.path.join(mount, "out.txt")), "out.txt")):
        if module is translate_cli:  # a line output: fill the disk to the last byte
          with open(os.path.join(mount, "more"), "wb") as f:
            f.write(b"\0" * (os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize))
        line = self.error_line(module, **flags)
        self.assertRegex(line, f"{os.path.join(mount, target)}.*no space left on the device; "
                         "free disk space there and rerun the same command")
        left = [p for p in files_below(mount) if ".tmp-" in p or ".ckpt-" in p or
                p.endswith(("/1", "avg.index"))]
        self.assertEmpty(left, line)


def start(*args, **kwargs):
  """`python -m nmt_tf ARGS` as a process, its output in pipes."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  # Ctrl-C reaches the command as at a terminal, whatever the test runner's workers ignore.
  reset = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
  return subprocess.Popen([sys.executable, "-m", "nmt_tf", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=reset, **kwargs)


@pytest.mark.slow  # processes
class InterruptedAndConcurrentCommandsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.rundir, _, _ = make_tiny_run(os.path.join(cls.tmp, "run"))

  def test_an_interrupted_translation_keeps_the_lines_done_in_order(self):
    words = "the boy helps the quick small king that meets the lion".split()
    lines = [" ".join(words[i % 7:i % 7 + 3 + i % 5]) for i in range(60_000)]
    source = os.path.join(self.tmp, "long.txt")
    write_text(source, "\n".join(lines) + "\n")
    for signum in (signal.SIGINT, signal.SIGTERM):
      output = os.path.join(self.tmp, f"out_{signum}.txt")
      write_text(output, "an earlier translation\n")
      process = start("translate", f"--run_dir={self.rundir.path}", f"--input_file={source}",
                      f"--output_file={output}", "--beam_size=1")
      partial, deadline = output + ".partial", time.time() + SAFETY_NET
      while time.time() < deadline and process.poll() is None and not (
          os.path.exists(partial) and os.path.getsize(partial) > 0):
        time.sleep(0.05)
      process.send_signal(signum)
      out, err = process.communicate(timeout=SAFETY_NET)
      self.assertEqual(process.returncode, 130, err[-2000:])
      with open(partial, encoding="utf-8") as f:
        done = f.read().splitlines()
      self.assertBetween(len(done), 1, len(lines) - 1)
      self.assertEqual(err.strip().splitlines(), [
          f"error: translate interrupted; the {len(done)} lines written so far are in "
          f"{partial} ({output} is unchanged); rerun the command for the whole output."])
      self.assertEqual(out, "")
      self.assertEqual(open(output, encoding="utf-8").read(), "an earlier translation\n")

  def test_an_export_stopped_by_sigterm_leaves_no_version_and_no_staging(self):
    export_dir = os.path.join(self.tmp, "stopped")
    process = start("export", f"--run_dir={self.rundir.path}", f"--export_dir={export_dir}",
                    "--export_warmup=false")
    model_dir, deadline = os.path.join(export_dir, "nmt"), time.time() + SAFETY_NET
    while time.time() < deadline and process.poll() is None and not (
        os.path.isdir(model_dir) and any(".tmp-" in n for n in os.listdir(model_dir))):
      time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=SAFETY_NET)
    self.assertEqual((process.returncode, out), (130, ""), err[-2000:])
    self.assertEqual(err, "error: export interrupted; nothing half-written is left (outputs are "
                     "staged and renamed when complete); rerun the command.\n")
    self.assertEqual(os.listdir(model_dir), [])

  def test_two_exports_of_one_model_take_two_versions(self):
    processes = [start("export", f"--run_dir={self.rundir.path}", "--export_warmup=false")
                 for _ in range(2)]
    results = [p.communicate(timeout=SAFETY_NET) for p in processes]
    for process, (out, err) in zip(processes, results):
      self.assertEqual(process.returncode, 0, err[-2000:])
    model_dir = os.path.join(self.rundir.export_dir, "nmt")
    self.assertCountEqual([out.strip() for out, _ in results],
                          [os.path.join(model_dir, v) for v in ("1", "2")])
    self.assertEqual(sorted(os.listdir(model_dir)), ["1", "2"])
    self.assertLen([err for _, err in results if "waiting for an export into" in err], 1)
    for version in ("1", "2"):
      tf.saved_model.load(os.path.join(model_dir, version))


if __name__ == "__main__":
  tf.test.main()
