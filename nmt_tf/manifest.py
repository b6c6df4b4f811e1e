"""The content check of every artifact a model is loaded with: `manifest.json`.

A manifest is written when its artifact is saved and read by every loader of it:

  {"format": 1,
   "files": {"vocab/source.model": "<sha256>", ...},   relative path -> SHA-256 of its bytes
   "sizes": {"source_vocab_size": 85, ...},              the sizes the model was built with
   ...}                                                  what else the artifact's writer keeps

`verify` hashes each listed file and compares; a file that differs, is missing, or a size the
loaded artifact reports otherwise is one ManifestError naming the file and the fix. A folder
without a manifest (made before manifests were written) is no error: `verify` returns None
and the caller checks it as before, and says so once (`note_once`).

This module needs the Python standard library only: a LiteRT export carries a copy of it
beside its client (nmt_manifest.py), which runs without TensorFlow and without nmt_tf.
"""

import hashlib
import json
import os
import sys

FILE = "manifest.json"
FORMAT = 1


class ManifestError(ValueError):
  """A file that differs from the one its artifact was saved with; one line naming it."""


def sha256(path):
  """The SHA-256 of a file's bytes, as hex."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def digest_of(value):
  """The SHA-256 of a JSON value (keys sorted): a checksum of settings rather than a file."""
  text = json.dumps(value, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def files_below(root, folder):
  """The relative paths of the files below `root/folder`, sorted (hidden files left out)."""
  found = []
  for directory, dirs, names in os.walk(os.path.join(root, folder)):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(names):
      if not name.startswith("."):
        found.append(os.path.relpath(os.path.join(directory, name), root))
  return found


def record(root, files, sizes=None, **extra):
  """The manifest of the files `files` (relative to `root`), with `sizes` and `extra`."""
  return {"format": FORMAT, "files": {name: sha256(os.path.join(root, name))
                                      for name in sorted(files)},
          "sizes": dict(sizes or {}), **extra}


def read(root):
  """The manifest of `root`, or None when it has none.

  Raises:
    ManifestError: the manifest exists but is not one.
  """
  path = os.path.join(root, FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      manifest = json.load(f)
    if not (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)):
      raise ValueError("no 'files' entry")
  except (OSError, ValueError, UnicodeDecodeError) as error:
    raise ManifestError(f"{path} is damaged ({type(error).__name__}: {error}); restore it "
                        "from a backup of the folder.") from None
  return manifest


def verify(root, fix, only=None):
  """Checks the files of `root`'s manifest against their checksums.

  Args:
    root: the artifact's folder (a run directory, an export).
    fix: what to do about a file that differs, for the message ("restore RUN/vocab from a
      backup of the run").
    only: check only the listed files whose path starts with one of these prefixes.

  Returns:
    The manifest, or None when `root` has none.

  Raises:
    ManifestError: one line naming the first file that is missing or differs.
  """
  manifest = read(root)
  if manifest is None:
    return None
  for name, expected in sorted(manifest["files"].items()):
    if only is not None and not any(name.startswith(prefix) for prefix in only):
      continue
    path = os.path.join(root, name)
    if not os.path.isfile(path):
      raise ManifestError(f"{path} is missing (the manifest {os.path.join(root, FILE)} lists "
                          f"it); {fix}.")
    if sha256(path) != expected:
      raise ManifestError(f"{path} differs from the file the model was saved with (its "
                          f"checksum in {os.path.join(root, FILE)}): it was changed or "
                          f"replaced; {fix}.")
  return manifest


def check_sizes(root, manifest, found, fix, source=None):
  """ManifestError when a size of `found` ({name: value}) differs from the manifest's (or
  from those of `source`, the file the sizes of `manifest` were read from)."""
  for name, value in sorted(found.items()):
    expected = manifest.get("sizes", {}).get(name)
    if expected is not None and value != expected:
      raise ManifestError(f"{root}: {name} is {value}, but the model was saved with {expected} "
                          f"({source or os.path.join(root, FILE)}); {fix}.")


_NOTED = set()


def note_once(root, stream=None):
  """Says once per process and folder that `root` has no manifest and is checked as before."""
  key = os.path.abspath(root)
  if key in _NOTED:
    return
  _NOTED.add(key)
  print(f"note: {root} has no {FILE} (saved by an older version): its files are checked by "
        "their sizes only.", file=stream or sys.stderr)
