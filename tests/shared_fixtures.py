"""Fixtures built once per test session and shared by every test file and worker that reads
them: a tiny run exported twice, for instance, is built by the first class that asks for it,
while the other pytest-xdist workers wait on a file lock, and read from disk by the rest.

A fixture is a folder under the session's root (`NMT_TF_TEST_SHARED`, made by conftest.py for
the whole session and removed at its end; a fresh temporary folder when a file runs without
it). Tests only read it: a test that changes a fixture works on a copy
(`shutil.copytree(fixture, self.get_temp_dir() + ...)`).
"""

import contextlib
import fcntl
import json
import os
import shutil
import tempfile

ROOT_VARIABLE = "NMT_TF_TEST_SHARED"
_DONE = "fixture.json"  # written last: the fixture is whole


def session_root():
  """The folder of this session's shared fixtures."""
  root = os.environ.get(ROOT_VARIABLE)
  if not root:
    root = os.environ[ROOT_VARIABLE] = tempfile.mkdtemp(prefix="nmt_tf_shared_")
  return root


@contextlib.contextmanager
def _locked(path):
  with open(path + ".lock", "a", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


def shared(name, build):
  """(folder, facts) of fixture `name`: `build(folder)` runs once per session (under a lock
  that other workers wait on) and returns facts (JSON-serializable) that every later call
  gets back from disk."""
  folder = os.path.join(session_root(), name)
  with _locked(folder):
    done = os.path.join(folder, _DONE)
    if not os.path.exists(done):
      shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
      os.makedirs(folder)
      facts = build(folder)
      with open(done, "w", encoding="utf-8") as f:
        json.dump(facts, f)
    with open(done, encoding="utf-8") as f:
      return folder, json.load(f)


def tiny_export_twice():
  """(export folder holding versions 1 and 2, the test corpus's source sentences) of
  server_fixtures.export_twice: a tiny untrained run exported with beam 3, 3-best (version 1)
  and beam 2, 2-best (version 2), without warm-up records."""
  def build(folder):
    from tests import server_fixtures  # pylint: disable=import-outside-toplevel
    run, corpus = server_fixtures.export_twice(os.path.join(folder, "run"))
    return {"export_dir": os.path.relpath(run.export_dir, folder),
            "test_sources": list(corpus["test"].sources)}
  folder, facts = shared("tiny_export_twice", build)
  return os.path.join(folder, facts["export_dir"]), facts["test_sources"]
