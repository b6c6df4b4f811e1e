"""Atomic file writes: a reader (a resumed run, the report, a second process) sees the old file
or the whole new one, never a half-written file, however the writer stops.

  write_bytes: PATH.tmp is written, then renamed over PATH (os.replace, atomic on POSIX);
  write_text and write_json write through it.
"""

import json
import os


def write_bytes(path, data):
  """Writes a binary file atomically."""
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, path)


def write_text(path, text):
  """Writes a UTF-8 text file atomically."""
  write_bytes(path, text.encode("utf-8"))


def write_json(path, values, compact=False):
  """Writes a JSON file atomically: indented with sorted keys, or on one line (compact) for
  large files such as sentence statistics."""
  write_text(path, json.dumps(values, separators=(",", ":")) if compact
             else json.dumps(values, indent=2, sort_keys=True))
