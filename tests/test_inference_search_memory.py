"""How many sentences a search call may take (inference/search_memory.py)."""

import os
import tempfile

import tensorflow as tf

from nmt_tf.inference import search_memory


class SearchMemoryTest(tf.test.TestCase):

  def test_available_memory_from_meminfo(self):
    path = os.path.join(tempfile.mkdtemp(), "meminfo")
    with open(path, "w", encoding="ascii") as f:
      f.write("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n")
    self.assertEqual(search_memory.available_bytes(path), 2048 * 1024)
    # Without the file: the physical memory, which a Linux machine always tells.
    self.assertGreater(search_memory.available_bytes(path + ".missing"), 0)

  def test_batches_fit_in_half_the_available_memory(self):
    per_sentence = search_memory.bytes_per_sentence(5, 100, 51, 8000)
    self.assertEqual(per_sentence, 4 * 4 * 5 * (100 * 51 + 8000))
    self.assertEqual(search_memory.batch_limit(5, 100, 51, 8000,
                                               available=2 * 64 * per_sentence), 64)
    self.assertEqual(search_memory.batch_limit(5, 100, 51, 8000,
                                               available=2 * per_sentence + 1), 1)
    with self.assertRaisesRegex(ValueError, r"^Received beam_size=5: its search of one "
                                r"51-token sentence would need about 0.0 GiB, more than half "
                                r"of the 0.0 GiB of memory available; use a smaller beam"):
      search_memory.batch_limit(5, 100, 51, 8000, available=per_sentence)


if __name__ == "__main__":
  tf.test.main()
