"""The layering of nmt_tf (docs/DESIGN.md, "Parts and what each may import"): every module of a
part imports only the parts below it, read from the source with `ast`."""

import ast
import os

import tensorflow as tf

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nmt_tf")
# Single modules that any part may use.
BASE = {"special_tokens", "atomic_write", "thread_local", "cpu"}
# Part -> the other parts it may import (besides itself and BASE).
MAY_IMPORT = {
    "layers": set(),
    "decoding": set(),
    "data": set(),
    "models": {"layers"},
    "experiment": {"models", "data"},
    "inference": {"layers", "models", "data", "decoding", "experiment"},
    "evaluation": {"data", "experiment", "inference"},
    "export": {"layers", "models", "data", "decoding", "experiment", "inference"},
    "training": {"layers", "models", "data", "decoding", "experiment", "inference",
                 "evaluation"},
    "cli": {"layers", "models", "data", "decoding", "experiment", "inference", "evaluation",
            "export", "training"},
}


def imported_parts(path):
  """The nmt_tf parts (subpackages or top-level modules) a source file imports."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  parts = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nmt_tf"):
      names = node.module.split(".")
      parts.update([names[1]] if len(names) > 1 else [a.name for a in node.names])
    elif isinstance(node, ast.Import):
      parts.update(a.name.split(".")[1] for a in node.names if a.name.startswith("nmt_tf."))
  return parts


class LayeringTest(tf.test.TestCase):

  def test_every_part_imports_only_the_parts_below_it(self):
    seen = set()
    for part in sorted(os.listdir(PACKAGE)):
      directory = os.path.join(PACKAGE, part)
      if not os.path.isdir(directory) or part.startswith("__"):
        continue
      self.assertIn(part, MAY_IMPORT, f"nmt_tf/{part} is a part docs/DESIGN.md does not place")
      seen.add(part)
      for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
          wrong = imported_parts(os.path.join(directory, name)) - {part} - BASE - MAY_IMPORT[part]
          self.assertEmpty(wrong, f"nmt_tf/{part}/{name} imports {sorted(wrong)}")
    self.assertEqual(seen, set(MAY_IMPORT))

  def test_the_check_sees_a_wrong_import(self):
    path = os.path.join(self.get_temp_dir(), "bad.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write("from nmt_tf.training import losses\nfrom nmt_tf import data\nimport nmt_tf.cli.x\n")
    self.assertEqual(imported_parts(path), {"training", "data", "cli"})


if __name__ == "__main__":
  tf.test.main()
