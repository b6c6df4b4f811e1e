"""Experiment recipes: one file per dataset setting (nmt_tf/configs/<recipe>.py, which a
checkout also shows as configs/), each a `get_config(model="cgru")` that sets what is
particular to its data. The model is a preset of nmt_tf/experiment/presets.py, named after a
colon: `--config=multi30k:luong` runs multi30k.py's get_config("luong") (ml_collections
passes what follows the colon).

  generated      the built-in generated pair: the quick start and the default
  multi30k       Multi30k task 1, SentencePiece vocabularies (docs/RESULTS.md)
  multi30k_word  Multi30k task 1, word vocabularies (Bahdanau et al. 2015's setting)
  wmt14          WMT14 English->German from TFDS
"""

import ast
import importlib.util
import os

from nmt_tf.experiment import presets

# Imports no TensorFlow (nor does the presets' module): `nmt-tf` imports this package before
# it silences TensorFlow's start-up lines, and `nmt-tf recipes` answers without it. A recipe's
# own module, run by `load`, imports it.
DEFAULT = "generated"


def recipe_dir():
  """The directory of the recipes."""
  return os.path.dirname(os.path.abspath(__file__))


def names():
  """The recipe names, sorted."""
  return sorted(f[:-3] for f in os.listdir(recipe_dir())
                if f.endswith(".py") and not f.startswith("_"))


def recipe_path(name):
  """nmt_tf/configs/<name>.py for a recipe name such as "multi30k" (None if there is none)."""
  path = os.path.join(recipe_dir(), f"{name}.py")
  return path if name and os.path.isfile(path) else None


def resolve(value):
  """(path, model) for a --config value that names a recipe ("multi30k", "multi30k:luong");
  None when the value names no recipe (a config file of the user's)."""
  name, _, model = value.partition(":")
  path = recipe_path(name) if os.sep not in name and not name.endswith(".py") else None
  if path is None:
    return None
  return path, model or None


def load(value):
  """The ml_collections ConfigDict that `--config=VALUE` gives: a recipe ("multi30k:luong",
  "generated") or a config file of the user's, FILE[:ARG] (its get_config(ARG),
  as ml_collections' config_flags calls it); ValueError naming the recipes if VALUE is
  neither."""
  found = resolve(value)
  if found is None:
    path, _, argument = value.partition(":")  # config_flags passes what follows ':'
    if not os.path.isfile(path):
      raise ValueError(f"No recipe or config file {value!r}; expected RECIPE[:MODEL] with "
                       f"RECIPE one of {', '.join(names())} and MODEL one of "
                       f"{', '.join(presets.MODELS)}, or the path of a config file.")
    found = path, argument or None
  path, argument = found
  module = _module(path)
  return module.get_config(argument) if argument else module.get_config()


def _module(path):
  """The recipe or config module at `path`, loaded from its file as ml_collections loads it."""
  spec = importlib.util.spec_from_file_location(
      f"nmt_tf_recipe_{os.path.splitext(os.path.basename(path))[0]}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def listing():
  """Lines: the recipes with their first docstring line, and the model presets."""
  lines = ["recipes (--config=RECIPE[:MODEL]; nmt_tf/configs/RECIPE.py):"]
  for name in names():
    with open(recipe_path(name), encoding="utf-8") as f:  # read, not run: no TensorFlow
      doc = ast.get_docstring(ast.parse(f.read())) or ""
    summary = doc.split("\n\n", 1)[0]
    lines.append(f"  {name:<18} {' '.join(summary.split())}")
  lines += ["", "models (MODEL; nmt_tf/experiment/presets.py; cgru when left out):"]
  for name, (fields, what) in presets.MODELS.items():
    settings = ", ".join(f"{key}={value!r}" for key, value in fields.items())
    lines.append(f"  {name:<18} {what} ({settings})")
  return lines
