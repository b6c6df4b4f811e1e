"""The recipes of nmt_tf/configs and the model presets: every RECIPE:MODEL validates, the old
one-file-per-model names give the configs they gave (tests/data/recipe_names.json holds them),
and `nmt-tf recipes` lists both."""

import json
import os

import tensorflow as tf

import nmt_tf
from nmt_tf import configs
from nmt_tf.cli import app
from nmt_tf.experiment import ExperimentConfig, presets
from nmt_tf.models.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD_CONFIGS = os.path.join(ROOT, "tests", "data", "recipe_names.json")


def _later_changes(config):
  """A config of tests/data/recipe_names.json with the recipe changes made since: the recipes
  that took bfloat16 products everywhere take them where the CPU has them (precision auto),
  in training and decoding; the SentencePiece Multi30k recipe scales its embedding tables and
  ties the output projection to the target table (but in luong, whose output layer reads
  its 512-unit state)."""
  config = json.loads(json.dumps(config))
  if config["train"]["precision"] == "float32_bf16_matmul":
    config["train"]["precision"] = "auto"
    config["decode"].pop("matmul_dtype", None)
    config["decode"]["precision"] = "auto"
  if (config["data"]["name"] == "multi30k"
      and config["tokenizer"]["kind"] == "sentencepiece"):
    config["model"]["scale_embeddings"] = True
    if config["model"]["decoder"] != "luong":
      config["model"]["tie_embeddings"] = "target"
  return config


class RecipesTest(tf.test.TestCase):

  def test_every_recipe_with_every_model_validates(self):
    self.assertEqual(configs.names(),
                     ["generated", "multi30k", "multi30k_word", "shapes", "wmt14"])
    for name in configs.names():
      self.assertEqual(configs.load(name).to_dict(), configs.load(f"{name}:cgru").to_dict())
      for model, (fields, _) in presets.MODELS.items():
        config = ExperimentConfig.from_dict(configs.load(f"{name}:{model}"))
        for key, value in fields.items():
          self.assertEqual(getattr(config.model, key), value, f"{name}:{model}")

  def test_old_names_give_the_same_configs(self):
    with open(OLD_CONFIGS, encoding="utf-8") as f:
      before = json.load(f)
    self.assertCountEqual(before, configs.old_names())
    for old, new in configs.old_names().items():
      # Compared as validated configs: decode.matmul_dtype="float32" of the old files is the
      # deprecated spelling of decode.precision="float32".
      expected = ExperimentConfig.from_dict(_later_changes(before[old]))
      self.assertEqual(ExperimentConfig.from_dict(configs.load(old)), expected, old)
      self.assertEqual(ExperimentConfig.from_dict(configs.load(new)), expected, new)
    # The old files' paths, as the results page's records and older docs wrote them.
    path, model, new = configs.resolve(os.path.join("configs", "luong_multi30k.py"))
    self.assertEqual((path, model, new),
                     (configs.recipe_path("multi30k"), "luong", "multi30k:luong"))

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
            "--config=cgru_multi30k_word", "--config=configs/x.py", "--run_dir=r"]
    self.assertEqual(app._recipe_names(argv),  # pylint: disable=protected-access
                     ["nmt-tf", "train", f"--config={configs.recipe_path('multi30k')}:luong",
                      "--config.train.steps=3",
                      f"--config={configs.recipe_path('multi30k_word')}:cgru",
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
