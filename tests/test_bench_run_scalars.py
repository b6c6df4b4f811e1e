"""bench/run_scalars.py: a run's TensorBoard scalars as text, a resumed run's later file winning."""

import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import run_scalars  # pylint: disable=import-error,wrong-import-position
from tests.waits import SAFETY_NET


def write_events(directory, points):
  """One events file in `directory` with {tag: [(step, value)]} as scalar summaries, and a
  text summary, which the reader leaves out."""
  writer = tf.summary.create_file_writer(directory)
  with writer.as_default():
    for tag, pairs in points.items():
      for step, value in pairs:
        tf.summary.scalar(tag, value, step=step)
    tf.summary.text("valid/sample", "ein Hund", step=0)
  writer.close()


class RunScalarsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.run_dir = tempfile.mkdtemp()
    events = os.path.join(self.run_dir, "tensorboard")
    write_events(events, {"train/grad_norm": [(100, 0.5), (200, 4.0)],
                          "reinforce/baseline": [(100, -2.0)]})
    # A resumed run opens a second file later (names start with the time); it logs step 200
    # again, as a run resumed from step 100 does.
    write_events(os.path.join(events, "resumed"), {"train/grad_norm": [(200, 3.0)],
                                                   "valid/bleu": [(200, 31.9661)]})

  def test_a_file_cut_short_keeps_its_whole_records(self):
    resumed = os.path.join(self.run_dir, "tensorboard", "resumed")
    path = os.path.join(resumed, os.listdir(resumed)[0])
    with open(path, "rb") as f:
      data = f.read()
    with open(path, "wb") as f:
      f.write(data[:-7])  # the last record (the text summary) cut in its middle
    values = run_scalars.read_scalars(self.run_dir)
    self.assertAllClose(values["valid/bleu"], {200: 31.9661})

  def test_the_later_file_wins_and_tags_and_steps_select(self):
    values = run_scalars.read_scalars(self.run_dir)
    self.assertEqual(sorted(values), ["reinforce/baseline", "train/grad_norm", "valid/bleu"])
    self.assertAllClose(values["train/grad_norm"], {100: 0.5, 200: 3.0})
    self.assertEqual(run_scalars.format_lines(values, ["train/", "valid/"], {200}),
                     ["train/grad_norm 200:3", "valid/bleu 200:31.97"])

  @pytest.mark.slow  # starts processes
  def test_the_script_prints_the_lines_and_refuses_a_run_without_events(self):
    command = [sys.executable, "bench/run_scalars.py", "--run_dir", self.run_dir,
               "--tags", "reinforce/"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_NET,
                          check=False)
    self.assertEqual((done.returncode, done.stdout), (0, "reinforce/baseline 100:-2\n"),
                     done.stderr[-2000:])
    for args, message in (
        (["--run_dir", tempfile.mkdtemp()], "no TensorBoard events under"),
        (["--run_dir", self.run_dir, "--steps", "1,x"], "expected integers")):
      done = subprocess.run([sys.executable, "bench/run_scalars.py", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=SAFETY_NET, check=False)
      self.assertEqual(done.returncode, 2)
      self.assertIn(message, done.stderr.splitlines()[-1])


if __name__ == "__main__":
  tf.test.main()
