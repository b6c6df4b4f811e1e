"""pytest setup: quiet TensorFlow logs, make the project importable, seed every class and test."""

import os
import sys
import zlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase's deprecated `test_session` context manager, which pytest would
  otherwise collect and report as a skipped test in every class."""
  items[:] = [item for item in items if item.name != "test_session"]


@pytest.fixture(autouse=True, scope="class")
def _seed_class(request):
  """Seeds Keras, TensorFlow, NumPy and Python before each class's setUpClass, from the class's
  node id: shared fixtures get the same weights in every process and in every test order."""
  _seed(request.node.nodeid)


@pytest.fixture(autouse=True)
def _seed_test(request):
  """Seeds the same four generators before each test, from the test's node id, so a test that
  builds a model without a seed of its own is still deterministic under pytest-xdist."""
  _seed(request.node.nodeid)


def _seed(node_id):
  import keras  # pylint: disable=import-outside-toplevel  (after TF_CPP_MIN_LOG_LEVEL is set)
  keras.utils.set_random_seed(zlib.crc32(node_id.encode()) % 2**31)
