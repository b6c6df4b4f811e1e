"""nmt_tf.thread_local.override: the trace-time switches' set-and-restore."""

import threading

import tensorflow as tf

from nmt_tf import thread_local


class OverrideTest(tf.test.TestCase):

  def test_sets_nests_and_restores(self):
    local = threading.local()
    with thread_local.override(local, "mode", "a") as value:
      self.assertEqual(value, "a")
      with thread_local.override(local, "mode", None):
        self.assertIsNone(local.mode)
      self.assertEqual(local.mode, "a")
    self.assertFalse(hasattr(local, "mode"))  # unset again, not set to a default

  def test_restores_after_an_error(self):
    local = threading.local()
    local.mode = 1
    with self.assertRaises(KeyError):
      with thread_local.override(local, "mode", 2):
        raise KeyError("boom")
    self.assertEqual(local.mode, 1)

  def test_other_threads_do_not_see_it(self):
    local = threading.local()
    seen = []
    with thread_local.override(local, "mode", "main"):
      thread = threading.Thread(target=lambda: seen.append(getattr(local, "mode", None)))
      thread.start()
      thread.join()
    self.assertEqual(seen, [None])


if __name__ == "__main__":
  tf.test.main()
