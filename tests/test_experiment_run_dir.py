"""ExperimentConfig checks across sections, and RunDir.prepare on a reopened run: the model,
data and tokenizer sections must match, except the settings that only initialise fresh weights."""

import dataclasses
import tempfile

import tensorflow as tf

from nmt_tf.experiment import RunDir
from nmt_tf.models import ConfigError
from tests.run_fixtures import tiny_experiment


def _with_model(config, **changes):
  return config.replace(model=config.model.replace(**changes))


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

  def test_both_source_reversals_are_refused(self):
    config = _with_model(tiny_experiment(), encoder="rnn", reverse_source=True)
    with self.assertRaisesRegex(ConfigError, "together they cancel out: set only one"):
      config.replace(pipeline=dataclasses.replace(config.pipeline, reverse_source=True))
