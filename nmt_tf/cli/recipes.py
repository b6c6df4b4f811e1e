"""Where the experiment recipes are: the package `nmt_tf.configs` (nmt_tf/configs/*.py, which
a checkout also shows as configs/), shipped with every install, so that `--config=NAME` finds a
recipe by its name."""

import os

from nmt_tf import configs


def recipe_dir():
  """The directory of the recipes."""
  return os.path.dirname(os.path.abspath(configs.__file__))


def recipe_path(name):
  """nmt_tf/configs/<name>.py for a recipe name such as "cgru_multi30k" (None if there is
  none)."""
  path = os.path.join(recipe_dir(), f"{name}.py")
  return path if os.path.isfile(path) else None


def names():
  """The recipe names, sorted."""
  return sorted(f[:-3] for f in os.listdir(recipe_dir())
                if f.endswith(".py") and not f.startswith("_"))
