"""The layering of nmt_tf (docs/DESIGN.md, "Parts and what each may import"): every module of a
part imports only the parts below it, read from the source with `ast`; the speed kernels
(nmt_tf/layers/kernels) import nothing else of nmt_tf and are used through their package only;
and the project speaks to its users only: no tracked text file tells how it was made (work
sessions, issue numbers)."""

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
BASE = {"special_tokens", "write_path", "manifest", "console", "cpu", "lazy"}
# Part -> the other parts it may import (besides itself and BASE).
MAY_IMPORT = {
    "layers": set(),
    "decoding": set(),
    "data": set(),
    "models": {"layers", "decoding"},
    "experiment": {"models", "data"},
    "configs": {"experiment"},
    "inference": {"layers", "models", "data", "decoding", "experiment"},
    "evaluation": {"data", "experiment", "inference"},
    "export": {"layers", "models", "data", "decoding", "experiment", "inference"},
    "server": {"layers", "models", "data", "decoding", "experiment", "inference", "export"},
    "training": {"layers", "models", "data", "decoding", "experiment", "inference",
                 "evaluation"},
    "cli": {"layers", "models", "data", "decoding", "experiment", "inference", "evaluation",
            "export", "server", "training", "configs"},
}


# The package of the speed kernels: it imports only itself; the rest of nmt_tf imports the
# package (its interface), never one of its modules.
KERNELS = "nmt_tf.layers.kernels"


def imported_modules(path):
  """The dotted names of nmt_tf a source file imports: `from nmt_tf.a import b` gives
  nmt_tf.a.b (b may be a module or a name of nmt_tf.a)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "nmt_tf":
      names.update(f"{node.module}.{a.name}" for a in node.names)
    elif isinstance(node, ast.Import):
      names.update(a.name for a in node.names if a.name.split(".")[0] == "nmt_tf")
  return names


def imported_parts(path):
  """The nmt_tf parts (subpackages or top-level modules) a source file imports."""
  return {name.split(".")[1] for name in imported_modules(path) if "." in name}


def source_files(directory):
  """The .py files below `directory`, subpackages included."""
  return sorted(os.path.join(d, name) for d, _, files in os.walk(directory) for name in files
                if name.endswith(".py"))


class LayeringTest(tf.test.TestCase):

  def test_every_part_imports_only_the_parts_below_it(self):
    seen = set()
    for part in sorted(os.listdir(PACKAGE)):
      directory = os.path.join(PACKAGE, part)
      if not os.path.isdir(directory) or part.startswith("__"):
        continue
      self.assertIn(part, MAY_IMPORT, f"nmt_tf/{part} is a part docs/DESIGN.md does not place")
      seen.add(part)
      for path in source_files(directory):
        wrong = imported_parts(path) - {part} - BASE - MAY_IMPORT[part]
        self.assertEmpty(wrong, f"{os.path.relpath(path, ROOT)} imports {sorted(wrong)}")
    self.assertEqual(seen, set(MAY_IMPORT))

  def test_the_kernels_are_used_through_their_package_only(self):
    kernels_dir = os.path.join(PACKAGE, *KERNELS.split(".")[1:])
    self.assertNotEmpty(source_files(kernels_dir))
    for path in source_files(PACKAGE):
      name = os.path.relpath(path, ROOT)
      imported = imported_modules(path)
      if path.startswith(kernels_dir + os.sep):
        wrong = {m for m in imported if m != KERNELS and not m.startswith(KERNELS + ".")}
        self.assertEmpty(wrong, f"{name} imports {sorted(wrong)} (kernels import only kernels)")
      else:
        wrong = {m for m in imported if m.startswith(KERNELS + ".")}
        self.assertEmpty(wrong, f"{name} imports {sorted(wrong)}; use the package "
                                f"{KERNELS}")

  def test_the_check_sees_a_wrong_import(self):
    path = os.path.join(self.get_temp_dir(), "bad.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write("from nmt_tf.training import losses\nfrom nmt_tf import data\nimport nmt_tf.cli.x\n"
              "from nmt_tf.layers.kernels import precision\n")
    self.assertEqual(imported_parts(path), {"training", "data", "cli", "layers"})
    self.assertIn(KERNELS + ".precision", imported_modules(path))


class StudyBesideTheLibraryTest(tf.test.TestCase):
  """The Multi30k study (experiments/) uses nmt_tf as its users do: the command line, the
  evaluation helpers, the CPU description and the console's silencer; nothing in nmt_tf
  knows the study."""

  STUDY_MAY_IMPORT = {"evaluation", "cpu", "console"}

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
