"""docs/KERAS.md: its examples run as written: nmt_tf layers in a user's functional model,
trained with `fit`, saved as `.keras` and loaded; a run's model saved as `.keras`."""

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
  """The Python blocks of docs/KERAS.md: (layers example, run's model example)."""
  with open(os.path.join(ROOT, "docs", "KERAS.md"), encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)
  assert len(blocks) == 2, len(blocks)
  return blocks


@pytest.mark.slow  # trains with fit and makes a run, as the docs' examples do
class KerasDocTest(tf.test.TestCase):

  def test_example_runs_as_written(self):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      exec(compile(keras_examples()[0], "docs/KERAS.md", "exec"), {})  # pylint: disable=exec-used
    lines = out.getvalue().splitlines()
    self.assertLen(lines, 2)
    losses = [float(x) for x in re.findall(r"[\d.]+", lines[0])]
    self.assertLen(losses, 3)
    self.assertLess(losses[-1], losses[0])
    self.assertEqual(lines[1], "same outputs: True")

  def test_a_runs_model_saves_as_written(self):
    root = tempfile.mkdtemp()
    make_tiny_run(os.path.join(root, "runs", "quickstart"))
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(root)
    try:
      with contextlib.redirect_stdout(out):
        exec(compile(keras_examples()[1], "docs/KERAS.md", "exec"), {})  # pylint: disable=exec-used
    finally:
      os.chdir(cwd)
    self.assertEqual(out.getvalue(), "Seq2Seq cgru\n")
    self.assertTrue(os.path.exists(os.path.join(root, "quickstart.keras")))


if __name__ == "__main__":
  tf.test.main()
