"""bench/alignment_agreement.py as users run it: two runs of one recipe, each model from the
checkpoint named, teacher-forced over a split."""

import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

from tests.run_fixtures import make_tiny_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import alignment_agreement  # pylint: disable=import-error,wrong-import-position
from tests.waits import SAFETY_NET


@pytest.mark.slow
class AlignmentAgreementBenchTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.first, _, cls.corpus = make_tiny_run(os.path.join(cls.tmp, "first"), seed=0)
    cls.second, _, _ = make_tiny_run(os.path.join(cls.tmp, "second"), seed=1)

  def test_a_model_agrees_with_itself_and_a_wide_window_with_any(self):
    share, steps = alignment_agreement.measure(self.first.path, self.first.path, "test",
                                               window=0, checkpoint="last",
                                               reference_checkpoint="best")
    # Every target piece of the 16 test pairs, EOS included.
    pieces = sum(len(t.split()) + 1 for t in self.corpus["test"].targets)
    self.assertEqual((share, steps), (1.0, pieces))
    share, _ = alignment_agreement.measure(self.first.path, self.second.path, "test",
                                           window=100)
    self.assertEqual(share, 1.0)
    share, _ = alignment_agreement.measure(self.first.path, self.second.path, "test",
                                           window=0, sentences=4)
    self.assertBetween(share, 0.0, 1.0)

  def test_the_script_reads_the_checkpoints_named(self):
    prefix = tf.train.latest_checkpoint(self.second.checkpoint_dir)
    done = subprocess.run(
        [sys.executable, "bench/alignment_agreement.py", "--run_dir", self.second.path,
         "--reference_run", self.second.path, "--window", "0", "--sentences", "2",
         "--checkpoint", prefix, "--reference_checkpoint", "last"],
        cwd=ROOT, capture_output=True, text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    self.assertRegex(done.stdout, r"^argmax within 0 of the reference's: 1\.000 of \d+ target "
                     r"pieces\n$")


if __name__ == "__main__":
  tf.test.main()
