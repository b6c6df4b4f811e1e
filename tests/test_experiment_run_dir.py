"""ExperimentConfig checks across sections, and RunDir.prepare on a reopened run: the model,
data and tokenizer sections must match, except the settings that only initialise fresh weights."""

import dataclasses
import os
import re
import tempfile

import keras
import numpy as np
import tensorflow as tf

from nmt_tf.experiment import DecodeConfig, ExperimentConfig, RunDir, RunDirError
from nmt_tf.manifest import ManifestError
from nmt_tf.models import build_model, ConfigError
from tests.run_fixtures import make_tiny_run, tiny_experiment


def _with_model(config, **changes):
  return config.replace(model=config.model.replace(**changes))


class DamagedRunTest(tf.test.TestCase):

  def test_damaged_config_names_the_file_and_the_fix(self):
    run = RunDir(tempfile.mkdtemp())
    run.prepare(tiny_experiment())
    for content in ('{\n  "model": {', '[1, 2]', '{"model": {"decoder": "cgru", "typo": 1}}'):
      with open(run.config_path, "w", encoding="utf-8") as f:
        f.write(content)
      for load in (run.load_config, lambda: run.prepare(tiny_experiment())):
        with self.assertRaisesRegex(RunDirError, f"^{run.config_path} is damaged .*; restore "
                                    "it from a backup, or write it again with the run's "
                                    "recipe: delete it and rerun `nmt-tf train"):
          load()

  def test_vocabulary_cut_short_is_refused(self):
    run, config, _ = make_tiny_run(tempfile.mkdtemp())
    path = os.path.join(run.vocab_dir, "source.vocab")
    with open(path, encoding="utf-8") as f:
      words = f.readlines()
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(words[:len(words) // 2])
    # The run's manifest names the file.
    changed = (f"^{re.escape(path)} differs from the file the model was saved with .*restore "
               f"{re.escape(run.path)} from a backup")
    with self.assertRaisesRegex(ManifestError, changed):
      run.load_model()
    with self.assertRaisesRegex(ManifestError, changed):
      run.prepare(tiny_experiment())
    # A run made before manifests: the sizes the config records.
    os.remove(os.path.join(run.path, "manifest.json"))
    message = (f"The source vocabulary in {run.vocab_dir} has {len(words) // 2} entries, but "
               f"the run's model was trained with {config.model.src_vocab_size} .*restore "
               f"{run.vocab_dir} from a backup")
    with self.assertRaisesRegex(RunDirError, message):
      run.load_model()
    with self.assertRaisesRegex(RunDirError, message):
      run.prepare(tiny_experiment())


class ReopenTest(tf.test.TestCase):

  def test_initialisation_settings_do_not_block_a_resume(self):
    run = RunDir(tempfile.mkdtemp())
    first = _with_model(tiny_experiment(), embedding_init_std=None)  # a run of an older version
    run.prepare(first)
    config, _, _, _ = run.prepare(tiny_experiment())  # today's default: 1.0
    self.assertIsNone(config.model.embedding_init_std)  # the run keeps what it was made with
    self.assertIsNone(run.load_config().model.embedding_init_std)

  def test_model_change_is_refused(self):
    run = RunDir(tempfile.mkdtemp())
    run.prepare(tiny_experiment())
    with self.assertRaisesRegex(ConfigError, r"different model config \(decoder_units: 16 -> "
                                r"32\); use a new --run_dir"):
      run.prepare(_with_model(tiny_experiment(), decoder_units=32))

  def test_train_change_is_allowed(self):
    run = RunDir(tempfile.mkdtemp())
    config = tiny_experiment()
    run.prepare(config)
    longer = config.replace(train=dataclasses.replace(config.train, steps=40))
    self.assertEqual(run.prepare(longer)[0].train.steps, 40)


if __name__ == "__main__":
  tf.test.main()


class ExperimentConfigTest(tf.test.TestCase):

  def test_removed_keys_of_an_earlier_config_json(self):
    """A key no section has any more is dropped when its value means what the current config
    does (every earlier config.json holds decode.matmul_dtype and pipeline.reverse_source),
    and refused, naming the setting to use, otherwise."""
    values = tiny_experiment().to_dict()
    values["decode"]["matmul_dtype"], values["pipeline"]["reverse_source"] = None, False
    self.assertEqual(ExperimentConfig.from_dict(values), tiny_experiment())
    values["decode"]["matmul_dtype"] = "float32"
    self.assertEqual(ExperimentConfig.from_dict(values), tiny_experiment())
    values["pipeline"]["reverse_source"] = True
    with self.assertRaisesRegex(ConfigError, r"^pipeline\.reverse_source=True is no longer a "
                                r"setting: delete it \(from the run's config\.json too\) and "
                                r"set model\.reverse_source=True \(model\.encoder='rnn'\), "
                                r"and retrain\.$"):
      ExperimentConfig.from_dict(values)

  def test_one_embedding_table_needs_one_vocabulary(self):
    values = tiny_experiment().to_dict()
    values["model"].update(tie_embeddings="all", src_vocab_size=values["model"]["tgt_vocab_size"])
    with self.assertRaisesRegex(ConfigError, "tie_embeddings='all' with tokenizer.shared=False; "
                                "one embedding table for both sides needs one vocabulary"):
      ExperimentConfig.from_dict(values)
    shared = dict(values, tokenizer=dict(values["tokenizer"], shared=True))
    self.assertTrue(ExperimentConfig.from_dict(shared).tokenizer.shared)

  def test_decode_precision(self):
    values = tiny_experiment().to_dict()
    values["decode"]["matmul_dtype"] = "bfloat16"
    with self.assertRaisesRegex(ConfigError, r"^decode\.matmul_dtype='bfloat16' is no longer a "
                                r"setting: .* and set decode\.precision=float32_bf16_matmul\.$"):
      ExperimentConfig.from_dict(values)
    with self.assertRaisesRegex(ConfigError, "Received decode.precision='bfloat16'; expected "
                                "one of \\('auto', 'float32', 'float32_bf16_matmul'\\)"):
      DecodeConfig(precision="bfloat16")


class LoadModelTest(tf.test.TestCase):

  def test_loaded_weights_are_the_checkpoint_s(self):
    # load_model builds with zeros (no initializer draws) and restores every weight.
    run, config, _ = make_tiny_run(tempfile.mkdtemp(), decoder="cgru")
    reader = tf.train.load_checkpoint(run.checkpoint_path("best"))
    saved = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
             if name.startswith("model/") and "OPTIMIZER" not in name}
    original = keras.layers.Layer.add_weight
    model, _, _, _ = run.load_model()
    self.assertIs(keras.layers.Layer.add_weight, original)
    self.assertLen(model.weights, len(saved))
    self.assertTrue(all(np.any(w.numpy() != 0) for w in model.weights
                        if "bias" not in w.path and "b_o" not in w.path))
    ckpt_values = sorted(float(np.sum(np.abs(v))) for v in saved.values())
    model_values = sorted(float(np.sum(np.abs(w.numpy()))) for w in model.weights)
    self.assertAllClose(ckpt_values, model_values)

  def test_zero_initialized_build(self):
    model = build_model(tiny_experiment().model.replace(src_vocab_size=20, tgt_vocab_size=20),
                        initialize=False)
    self.assertNotEmpty(model.weights)
    self.assertTrue(all(not np.any(w.numpy()) for w in model.weights))
