"""pytest setup: quiet TensorFlow logs, make the project importable, seed every class and test."""

import os
import shutil
import sys
import zlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests import shared_fixtures  # pylint: disable=wrong-import-position


# Test files whose classes take minutes: they run first, so that with several workers
# (pytest-xdist) the many short classes fill the end of the run instead of waiting for them.
LONG_FIRST = ("tests/test_release_install.py", "experiments/multi30k/test_study.py",
              "tests/test_training_processes.py")


def pytest_configure(config):
  """The session's folder of shared fixtures (tests/shared_fixtures.py), made by the main
  process before pytest-xdist starts its workers, which inherit it."""
  if not hasattr(config, "workerinput"):
    os.environ.pop(shared_fixtures.ROOT_VARIABLE, None)  # a folder of this session's own
    config.nmt_tf_shared = shared_fixtures.session_root()


def pytest_unconfigure(config):
  if hasattr(config, "nmt_tf_shared"):
    shutil.rmtree(config.nmt_tf_shared, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
  """Drops tf.test.TestCase's deprecated `test_session` context manager, which pytest would
  otherwise collect and report as a skipped test in every class; puts LONG_FIRST first."""
  del config
  items[:] = [item for item in items if item.name != "test_session"]
  items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable


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
