"""The recipes of nmt_tf/configs and the model presets: every RECIPE:MODEL validates, a
config file of the user's is not a recipe, and `nmt-tf recipes` lists both."""

import os

import tensorflow as tf

import nmt_tf
from nmt_tf import configs
from nmt_tf.cli import app
from nmt_tf.experiment import ExperimentConfig, presets
from nmt_tf.models.config import ConfigError

class RecipesTest(tf.test.TestCase):

  def test_every_recipe_with_every_model_validates(self):
    self.assertEqual(configs.names(),
                     ["generated", "multi30k", "multi30k_lowres", "multi30k_multilingual",
                      "multi30k_word", "shapes", "wmt14"])
    for name in configs.names():
      self.assertEqual(configs.load(name).to_dict(), configs.load(f"{name}:cgru").to_dict())
      for model, (fields, _) in presets.MODELS.items():
        config = ExperimentConfig.from_dict(configs.load(f"{name}:{model}"))
        for key, value in fields.items():
          self.assertEqual(getattr(config.model, key), value, f"{name}:{model}")

  def test_a_config_file_of_the_users_is_not_a_recipe(self):
    self.assertIsNone(configs.resolve("my_configs/multi30k.py"))
    self.assertIsNone(configs.resolve(os.path.join("configs", "my_experiment.py")))
    self.assertIsNone(configs.resolve("no_such_recipe"))
    with self.assertRaisesRegex(ValueError, "RECIPE one of generated, multi30k, .* and MODEL "
                                "one of cgru, rnnsearch"):
      configs.load("no_such_recipe")

  def test_an_unknown_model_names_the_presets(self):
    with self.assertRaisesRegex(ConfigError, "Unknown model preset 'transformer'; expected one "
                                "of cgru, rnnsearch, encdec, luong, sar_avg"):
      configs.load("multi30k:transformer")

  def test_command_line_names(self):
    argv = ["nmt-tf", "train", "--config=multi30k:luong", "--config.train.steps=3",
            "--config=multi30k_word", "--config=configs/x.py", "--run_dir=r"]
    self.assertEqual(app._recipe_names(argv),  # pylint: disable=protected-access
                     ["nmt-tf", "train", f"--config={configs.recipe_path('multi30k')}:luong",
                      "--config.train.steps=3",
                      f"--config={configs.recipe_path('multi30k_word')}",
                      "--config=configs/x.py", "--run_dir=r"])

  def test_python_api(self):
    self.assertIs(nmt_tf.recipe, configs.load)

  def test_a_config_file_loads_as_the_config_flag_loads_it(self):
    """FILE[:ARG] of the user's: its get_config(ARG), or get_config() without an argument."""
    path = os.path.join(self.get_temp_dir(), "my_config.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write("from nmt_tf.configs import generated\n\n"
              "def get_config(model='cgru'):\n"
              "  config = generated.get_config(model)\n"
              "  config.train.steps = 7\n"
              "  return config\n")
    self.assertEqual(configs.load(path).train.steps, 7)
    self.assertEqual(configs.load(path).model.to_dict(),
                     configs.load("generated").model.to_dict())
    self.assertEqual(configs.load(f"{path}:luong").model.to_dict(),
                     configs.load("generated:luong").model.to_dict())
    with self.assertRaisesRegex(ValueError, r"^No recipe or config file 'nowhere\.py'; expected "
                                r"RECIPE\[:MODEL\] with RECIPE one of generated, "):
      configs.load("nowhere.py")

  def test_listing(self):
    text = "\n".join(configs.listing())
    for name in configs.names():
      self.assertIn(f"\n  {name} ", text)
    self.assertIn("  luong              Luong et al. 2015: general score, input feeding "
                  "(decoder='luong', attention='general')", text)
    self.assertIn("multi30k           Multi30k task 1 (29,000 image descriptions, de/en/fr) "
                  "with SentencePiece vocabularies", text)


if __name__ == "__main__":
  tf.test.main()
