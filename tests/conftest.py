"""pytest setup: quiet TensorFlow logs and make the project importable."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase's deprecated `test_session` context manager, which pytest would
  otherwise collect and report as a skipped test in every class."""
  items[:] = [item for item in items if item.name != "test_session"]
