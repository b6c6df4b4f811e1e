"""What the anchors' scripts share, with no third-party import (each runs in its own venv)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def machine():
  """'<cpus> CPUs <model name>' from /proc/cpuinfo."""
  name = "unknown CPU"
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      if line.startswith("model name"):
        name = line.split(":", 1)[1].strip()
        break
  return f"{os.cpu_count()} CPUs {name}"


def add_dir_arguments(parser, multi30k=False):
  """--anchor_dir ($ANCHOR_DIR, else ../anchor beside the project) and, with multi30k,
  --multi30k_dir ($NMT_TF_MULTI30K_DIR, else ../shared/data/multi30k)."""
  parser.add_argument("--anchor_dir", default=os.environ.get(
      "ANCHOR_DIR", os.path.normpath(os.path.join(ROOT, "..", "anchor"))))
  if multi30k:
    parser.add_argument("--multi30k_dir", default=os.environ.get(
        "NMT_TF_MULTI30K_DIR", os.path.join(ROOT, "..", "shared", "data", "multi30k")))
