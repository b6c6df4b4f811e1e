"""`Seq2Seq` trains with Keras' own `compile`, `fit` and `evaluate`: one `fit` step is the
trainer's step (the same `update.replica_update`), `evaluate` reports the mean token loss and
its perplexity, and `fit` runs under tf.distribute.MirroredStrategy with Keras' callbacks
(EarlyStopping, ModelCheckpoint, TensorBoard, BackupAndRestore) and the project's
BleuValidation, which writes what `nmt-tf train`'s validation writes."""

import glob
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import data
from nmt_tf.experiment.config import ReinforceConfig, TrainConfig
from nmt_tf.models import Seq2Seq, losses
from nmt_tf.training import BleuValidation, objectives
from nmt_tf.training.train_step import TrainStep
from tests.model_fixtures import batch, tiny_config
from tests.run_fixtures import make_tiny_run, tensorboard_events
from tests.training_fixtures import sgd_update
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Three presets trained with fit under MirroredStrategy over two logical CPU devices (which
# must be set before TensorFlow starts, so in a process of its own); prints their losses.
TWO_DEVICES = """
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from nmt_tf.experiment import presets
from nmt_tf.models import Seq2Seq
from tests.model_fixtures import batch, tiny_config
b = batch()
pairs = tf.data.Dataset.from_tensors(
    ({"source": b["source"], "target_in": b["target_in"]}, b["target_out"])).repeat(8)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
losses = {"replicas": strategy.num_replicas_in_sync}
for name in ("cgru", "rnnsearch", "sar_cavg"):
  keras.utils.set_random_seed(0)
  with strategy.scope():
    model = Seq2Seq(tiny_config(**presets.model_fields(name)))
    model.compile(optimizer=keras.optimizers.Adam(0.02))
  losses[name] = model.fit(pairs, epochs=3, verbose=0).history["loss"]
print(json.dumps(losses))
"""


def seeded_model(**overrides):
  keras.utils.set_random_seed(4)
  model = Seq2Seq(tiny_config(decoder="cgru", dropout=0.0, **overrides))
  model.build_with_dummy_batch()
  return model


def keras_pairs(b, repeat=1):
  """A tf.data dataset of Keras' (x, y) pairs of the batch `b`, `repeat` times."""
  x = {"source": b["source"], "target_in": b["target_in"]}
  return tf.data.Dataset.from_tensors((x, b["target_out"])).repeat(repeat)


class FitStepTest(tf.test.TestCase):

  def test_a_fit_step_is_its_equations(self):
    """Run eagerly (the graph of fit is the trainer's, below): a clipped SGD update."""
    model, b, loss, _, expected = sgd_update(clip_norm=0.05)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), clip_norm=0.05,
                  run_eagerly=True)
    x = {"source": b["source"], "target_in": b["target_in"]}
    self.assertAllClose(model.compute_loss(x, b["target_out"], model(x, training=True)), loss,
                        rtol=1e-5)  # Keras' compute_loss: the objective's loss
    history = model.fit(keras_pairs(b), epochs=1, verbose=0)
    self.assertAllClose(history.history["loss"][0], loss, rtol=1e-5)
    self.assertAllClose(history.history["perplexity"][0], np.exp(loss), rtol=1e-5)
    for variable, want in zip(model.trainable_variables, expected):
      self.assertAllClose(variable, want, atol=1e-5, msg=variable.path)

  @pytest.mark.slow  # traces fit's step and the trainer's, twice
  def test_a_fit_step_is_the_trainers_step(self):
    b = batch()
    trained = seeded_model()
    step = TrainStep(trained, keras.optimizers.Adam(0.01), tf.distribute.get_strategy(),
                     TrainConfig(clip_norm=0.05, label_smoothing=0.1))
    out = step(b)
    fitted = seeded_model()
    fitted.compile(optimizer=keras.optimizers.Adam(0.01), label_smoothing=0.1, clip_norm=0.05)
    history = fitted.fit(keras_pairs(b), epochs=1, verbose=0)
    self.assertAllClose(history.history["loss"][0], float(out["loss"]), rtol=1e-5)
    for a, w in zip(fitted.trainable_variables, trained.trainable_variables):
      self.assertAllClose(a, w, atol=1e-6, msg=a.path)
    # The project's own batches (dicts with target_out) train alike.
    fitted.fit(tf.data.Dataset.from_tensors(b), epochs=1, verbose=0)
    step(b)
    for a, w in zip(fitted.trainable_variables, trained.trainable_variables):
      self.assertAllClose(a, w, atol=1e-6, msg=a.path)

  def test_evaluate_reports_the_mean_token_loss_and_its_perplexity(self):
    b = batch()
    model = seeded_model()
    model.compile(optimizer="adam", label_smoothing=0.1)  # evaluate smooths nothing
    result = model.evaluate(keras_pairs(b, repeat=2), verbose=0, return_dict=True)
    total, tokens = losses.token_loss_sum(model(b)["logits"], b["target_out"])
    self.assertAllClose(result["loss"], float(total / tokens), rtol=1e-5)
    self.assertAllClose(result["perplexity"], np.exp(float(total / tokens)), rtol=1e-5)

  def test_what_fit_cannot_take_is_one_clear_error(self):
    model = seeded_model()
    with self.assertRaisesRegex(ValueError, "the model's objective is its loss"):
      model.compile(optimizer="adam", loss="mse")
    with self.assertRaisesRegex(ValueError, "received metrics=.*pass objective= instead"):
      model.compile(optimizer="adam", metrics=["accuracy"])
    hard = objectives.Reinforce(ReinforceConfig())
    with self.assertRaisesRegex(ValueError, "hard attention.*train it with nmt-tf train"):
      model.compile(optimizer="adam", objective=hard)
    model.compile(optimizer="adam")
    b = batch()
    without_target = tf.data.Dataset.from_tensors(
        {"source": b["source"], "target_in": b["target_in"]})
    with self.assertRaisesRegex(ValueError, "expects batches .* dict without target_out"):
      model.fit(without_target, verbose=0)
    without_target_in = tf.data.Dataset.from_tensors(({"source": b["source"]}, b["target_out"]))
    with self.assertRaisesRegex(ValueError, "expects batches .* dict x without target_in"):
      model.fit(without_target_in, verbose=0)


@pytest.mark.slow  # trains under a strategy for a few epochs, writes files
class FitCallbacksTest(tf.test.TestCase):

  def test_mirrored_strategy_and_keras_callbacks(self):
    b = batch()
    folder = self.get_temp_dir()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
      model = seeded_model()
      model.compile(optimizer=keras.optimizers.Adam(0.01), clip_norm=0.5)
    best = os.path.join(folder, "best.keras")
    callbacks = [
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=1),
        keras.callbacks.ModelCheckpoint(best, monitor="val_loss", save_best_only=True),
        keras.callbacks.TensorBoard(os.path.join(folder, "tensorboard")),
        keras.callbacks.BackupAndRestore(os.path.join(folder, "backup")),
    ]
    history = model.fit(keras_pairs(b, repeat=4), validation_data=keras_pairs(b), epochs=6,
                        callbacks=callbacks, verbose=0)
    losses_seen = history.history["loss"]
    self.assertLess(losses_seen[-1], losses_seen[0])
    self.assertIn("val_perplexity", history.history)
    self.assertNotEmpty(glob.glob(os.path.join(folder, "tensorboard", "train", "events.*")))
    loaded = keras.saving.load_model(best)  # compiled as saved, with its optimizer's state
    self.assertIsInstance(loaded, Seq2Seq)
    self.assertEqual(loaded.clip_norm, 0.5)
    best_epoch = int(np.argmin(history.history["val_loss"]))
    self.assertEqual(int(loaded.optimizer.iterations), 4 * (best_epoch + 1))  # 4 steps an epoch
    evaluated = loaded.evaluate(keras_pairs(b), verbose=0, return_dict=True)
    self.assertAllClose(evaluated["loss"], min(history.history["val_loss"]), rtol=1e-5)
  def test_three_presets_learn_under_mirrored_strategy_on_two_devices(self):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", TWO_DEVICES], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    losses = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(losses.pop("replicas"), 2)
    for name, values in losses.items():
      self.assertLess(values[-1], values[0], name)

  def test_bleu_validation_writes_what_nmt_tf_train_writes(self):
    folder = self.get_temp_dir()
    run, config, corpus = make_tiny_run(os.path.join(folder, "run"))  # decode.beam_size 3
    model, _, source_tokenizer, target_tokenizer = run.load_model("best")
    model.compile(optimizer=keras.optimizers.Adam(0.02))
    train = data.make_eval_dataset(corpus["train"], source_tokenizer, target_tokenizer,
                                   config.pipeline).take(4)  # batches with target_out
    sources, references = list(corpus["valid"].sources), list(corpus["valid"].targets)
    validation = BleuValidation(source_tokenizer, target_tokenizer, sources, references,
                                config=config, log_dir=os.path.join(folder, "tensorboard"))
    history = model.fit(train, epochs=2, verbose=0, callbacks=[
        validation, keras.callbacks.EarlyStopping(monitor="val_bleu", mode="max", patience=5)])
    self.assertLen(history.history["val_bleu"], 2)
    self.assertTrue(all(0.0 <= b <= 100.0 for b in history.history["val_bleu"]))
    tags = tensorboard_events(folder)  # folder/tensorboard/events.*
    for tag in ("valid/bleu", "valid/loss", "valid/perplexity", "valid/length_ratio",
                "valid/samples", "valid/alignment/0", "valid/alignment_beam/0"):
      self.assertIn(tag, tags)
    self.assertEqual([step for step, _ in tags["valid/bleu"]], [1, 2])
    with self.assertRaisesRegex(ValueError, "2 sources and 1 references"):
      BleuValidation(source_tokenizer, target_tokenizer, sources[:2], references[:1])


if __name__ == "__main__":
  tf.test.main()
