"""The layering of nmt_tf (docs/DESIGN.md, "Parts and what each may import"): every module of a
part imports only the parts below it, read from the source with `ast`; and the project speaks
to its users only: no tracked text file tells how it was made (work sessions, issue numbers)."""

import ast
import os
import re
import subprocess

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "nmt_tf")
# Words about how the project was made, which its users have no use for: a work session or an
# issue followed by its number.
HISTORY_WORDS = ("sessions? ", "session-", "github issue ", "issues? #?")
HISTORY = re.compile(r"\b(?:" + "|".join(HISTORY_WORDS) + r")\d", re.IGNORECASE)
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


class StudyBesideTheLibraryTest(tf.test.TestCase):
  """The Multi30k study (experiments/) uses nmt_tf as its users do: the command line, the
  evaluation helpers and the CPU description; nothing in nmt_tf knows the study."""

  STUDY_MAY_IMPORT = {"evaluation", "cpu"}

  def test_the_study_uses_the_public_parts_only(self):
    for directory, _, files in os.walk(os.path.join(ROOT, "experiments")):
      for name in files:
        if name.endswith(".py"):
          wrong = imported_parts(os.path.join(directory, name)) - self.STUDY_MAY_IMPORT
          self.assertEmpty(wrong, f"{os.path.join(directory, name)} imports {sorted(wrong)}")

  def test_the_library_does_not_import_the_study(self):
    for directory, _, files in os.walk(PACKAGE):
      for name in files:
        if name.endswith(".py"):
          with open(os.path.join(directory, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
          for node in ast.walk(tree):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                       [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for module in modules:
              self.assertFalse(module.startswith("experiments"), os.path.join(directory, name))

def tracked_files():
  """The files git tracks in the project (every file below it when git cannot say)."""
  try:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in out.stdout.decode("utf-8").split("\0") if name]
  except (OSError, subprocess.CalledProcessError):
    return [os.path.relpath(os.path.join(d, f), ROOT) for d, _, files in os.walk(ROOT)
            for f in files if "/.git/" not in d + "/" and "/.venv" not in d]


def history_lines(text):
  """The lines of `text` that speak of how the project was made."""
  return [line.strip() for line in text.splitlines() if HISTORY.search(line)]


class SpeaksToUsersTest(tf.test.TestCase):

  def test_no_tracked_text_file_tells_how_the_project_was_made(self):
    found = {}
    for name in tracked_files():
      try:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
          lines = history_lines(f.read())
      except (UnicodeDecodeError, OSError):
        continue  # binary files (figures)
      if lines:
        found[name] = lines[:2]
    self.assertEmpty(found)

  def test_the_check_sees_such_words(self):
    made = [f"measured in {word}9" for word in ("session ", "GitHub issue ", "issue #",
                                                 "Session-")]
    self.assertLen(history_lines("\n".join(made + ["the ball's possession 2 times",
                                                    "session state"])), 4)


if __name__ == "__main__":
  tf.test.main()
