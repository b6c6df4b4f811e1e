"""docs/KERAS.md: its examples run as written: nmt_tf layers in a user's functional model,
trained with `fit`, saved as `.keras` and loaded; a Seq2Seq trained with `fit` under a
strategy; a run's model saved as `.keras`."""

import contextlib
import io
import os
import re
import tempfile

import pytest
import tensorflow as tf

from tests.run_fixtures import make_tiny_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def keras_examples():
  """The Python blocks of docs/KERAS.md: (layers example, fit example, run's model example)."""
  with open(os.path.join(ROOT, "docs", "KERAS.md"), encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)
  assert len(blocks) == 3, len(blocks)
  return blocks


def printed(index):
  """The lines that example `index` of docs/KERAS.md prints, run in the current folder."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(keras_examples()[index], "docs/KERAS.md", "exec"), {})  # pylint: disable=exec-used
  return out.getvalue().splitlines()


@pytest.mark.slow  # trains with fit and makes a run, as the docs' examples do
class KerasDocTest(tf.test.TestCase):

  def assert_falls(self, line):
    """The three numbers of `line` (one per epoch) end lower than they start."""
    values = [float(x) for x in re.findall(r"[\d.]+", line)]
    self.assertLen(values, 3)
    self.assertLess(values[-1], values[0])

  def test_example_runs_as_written(self):
    lines = printed(0)
    self.assertLen(lines, 2)
    self.assert_falls(lines[0])  # the losses
    self.assertEqual(lines[1], "same outputs: True")

  def test_fit_example_runs_as_written(self):
    lines = printed(1)
    self.assertLen(lines, 3)
    self.assert_falls(lines[0])  # the perplexities
    self.assertEqual(lines[1], "['loss', 'perplexity']")
    self.assertEqual(lines[2], "(2, 2, 8)")

  def test_a_runs_model_saves_as_written(self):
    root = tempfile.mkdtemp()
    make_tiny_run(os.path.join(root, "runs", "quickstart"))
    cwd = os.getcwd()
    os.chdir(root)
    try:
      lines = printed(2)
    finally:
      os.chdir(cwd)
    self.assertEqual(lines, ["Seq2Seq cgru"])
    self.assertTrue(os.path.exists(os.path.join(root, "quickstart.keras")))


if __name__ == "__main__":
  tf.test.main()
