"""nmt_tf.atomic_write: whole files or none, in the formats the run files have always had."""

import json
import os
import tempfile

import tensorflow as tf

from nmt_tf.atomic_write import write_json, write_text


class AtomicWriteTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = tempfile.mkdtemp()
    self.path = os.path.join(self.dir, "report.json")

  def read(self):
    with open(self.path, encoding="utf-8") as f:
      return f.read()

  def test_text_replaces_the_file_and_leaves_no_temporary(self):
    write_text(self.path, "old\n")
    write_text(self.path, "new ü\n")
    self.assertEqual(self.read(), "new ü\n")
    self.assertEqual(os.listdir(self.dir), ["report.json"])

  def test_json_formats(self):
    values = {"b": [1, 2], "a": 0.5}
    write_json(self.path, values)
    self.assertEqual(self.read(), json.dumps(values, indent=2, sort_keys=True))
    write_json(self.path, values, compact=True)  # one line, keys in their order
    self.assertEqual(self.read(), '{"b":[1,2],"a":0.5}')

  def test_a_value_that_cannot_be_written_keeps_the_old_file(self):
    write_json(self.path, {"steps": 10})
    with self.assertRaises(TypeError):
      write_json(self.path, {"steps": object()})
    self.assertEqual(json.loads(self.read()), {"steps": 10})
    self.assertEqual(os.listdir(self.dir), ["report.json"])


if __name__ == "__main__":
  tf.test.main()
