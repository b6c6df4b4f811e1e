"""Where the experiment recipes (configs/*.py) are: the project's configs/ directory in a
checkout, or the copy an installed nmt_tf ships as the package `nmt_tf.configs`."""

import importlib.util
import os

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recipe_dir():
  """The directory of the recipes, or None when neither place has them."""
  checkout = os.path.join(PROJECT_ROOT, "configs")
  if os.path.isfile(os.path.join(checkout, "default.py")):
    return checkout
  spec = importlib.util.find_spec("nmt_tf.configs")
  if spec is not None and spec.submodule_search_locations:
    return list(spec.submodule_search_locations)[0]
  return None


def recipe_path(name):
  """configs/<name>.py for a recipe name such as "cgru_multi30k" (None if there is none)."""
  directory = recipe_dir()
  path = os.path.join(directory, f"{name}.py") if directory else None
  return path if path and os.path.isfile(path) else None


def names():
  """The recipe names, sorted."""
  directory = recipe_dir()
  if directory is None:
    return []
  return sorted(f[:-3] for f in os.listdir(directory)
                if f.endswith(".py") and not f.startswith("_"))
