"""nmt_tf/lazy.py: the packages' names imported on first use, as their eager imports gave them."""

import importlib
import subprocess
import sys

import tensorflow as tf

from nmt_tf import experiment
from nmt_tf import models
from tests.release_fixtures import ROOT
from tests.waits import SAFETY_NET


class LazyAttributesTest(tf.test.TestCase):

  def test_every_name_is_the_object_of_its_module(self):
    for package in (experiment, models):
      table = package._MODULES  # pylint: disable=protected-access
      for name, module in table.items():
        self.assertIs(getattr(package, name), getattr(importlib.import_module(module), name))
      self.assertEqual(sorted(package.__all__), sorted(table))

  def test_a_submodule_by_attribute_and_an_unknown_name(self):
    self.assertIs(models.seq2seq, importlib.import_module("nmt_tf.models.seq2seq"))
    with self.assertRaisesRegex(AttributeError, "module 'nmt_tf.models' has no attribute 'nope'"):
      models.nope  # pylint: disable=pointless-statement
    self.assertFalse(hasattr(experiment, "nope"))

  def test_the_presets_model_config_and_recipes_load_without_tensorflow(self):
    program = ("import sys\n"
               "from nmt_tf.experiment import presets\n"
               "from nmt_tf.models import ConfigError, ModelConfig\n"
               "from nmt_tf import configs\n"
               "configs.listing(), configs.resolve('multi30k'), ModelConfig()\n"
               "print('tensorflow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         cwd=ROOT, timeout=SAFETY_NET, check=True)
    self.assertEqual(out.stdout.strip(), "False")


if __name__ == "__main__":
  tf.test.main()
