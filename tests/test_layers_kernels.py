"""nmt_tf.layers.kernels, the interface of the speed kernels: KernelOptions and how they reach
the layers and the loss, the products `matmul` makes, and the trace-time state of the precision
scope (per thread, restored after errors)."""

import dataclasses
import threading
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.experiment import TrainConfig
from nmt_tf.layers import kernels, ops
from nmt_tf.models import Seq2Seq, build_model
from nmt_tf.training import objectives
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.train_step import TrainStep
from tests.model_fixtures import batch, tiny_config


class KernelOptionsTest(tf.test.TestCase):

  def test_defaults_are_the_training_paths(self):
    options = kernels.KernelOptions()
    self.assertEqual(options, kernels.DEFAULT_OPTIONS)
    self.assertEqual((options.defer_gradients, options.compiled_cell), (None, "auto"))
    self.assertTrue(options.resolve().compiled_cell)
    self.assertFalse(options.resolve(compute_dtype="bfloat16").compiled_cell)  # float32 only
    self.assertFalse(kernels.KernelOptions(compiled_cell="off").resolve().compiled_cell)

  def test_bad_values(self):
    with self.assertRaisesRegex(ValueError, "compiled_cell='on'"):
      kernels.KernelOptions(compiled_cell="on")
    with self.assertRaisesRegex(ValueError, "defer_gradients=1; expected None, True or False"):
      kernels.KernelOptions(defer_gradients=1)

  def test_frozen_and_hashable(self):
    options = kernels.KernelOptions(defer_gradients=True)
    with self.assertRaises(dataclasses.FrozenInstanceError):
      options.defer_gradients = False
    self.assertEqual(hash(options), hash(kernels.KernelOptions(defer_gradients=True)))


class OptionsReachTheLayersTest(tf.test.TestCase):
  """The model's options, or those of one call, choose the kernels of its encoder and
  decoder."""

  def setUp(self):
    super().setUp()
    keras.utils.set_random_seed(2)
    self.model = Seq2Seq(tiny_config(decoder="cgru"))
    self.batch = batch()
    self.model(self.batch)

  def cell_scopes(self, kernel_options=None, training=True):
    """The compiled_cell setting of the pass scope each GRU step of one pass ran in."""
    seen = []
    reset_after = ops.gru_reset_after
    with mock.patch.object(ops, "gru_reset_after", lambda *a: seen.append(
        kernels.precision.trace_state.get("pass_scope").compiled_cell) or reset_after(*a)):
      if kernel_options is not None:
        self.model.kernel_options = kernel_options
      self.model(self.batch, training=training)
    return set(seen)

  def test_options_choose_the_cell(self):
    self.assertEqual(self.cell_scopes(), {True})
    self.assertEqual(self.cell_scopes(training=False), {False})  # decoding: plain ops
    self.assertEqual(self.cell_scopes(kernels.KernelOptions(compiled_cell="off")), {False})

  def test_resolved_once_where_the_model_is_built(self):
    # The encoder and the decoder hold the TrainingLoops of the resolved choice; changing the
    # options or the precision resolves again.
    model = Seq2Seq(tiny_config(decoder="memory_rnn"), matmul_dtype="bfloat16")
    decoder = model.decoder
    self.assertTrue(decoder.loops.choice.compiled_cell)
    self.assertIs(model.encoder.loops, decoder.loops)
    self.assertFalse(decoder.loops.choice.defer_gradients)  # float32 inputs
    model.matmul_dtype = None
    self.assertTrue(decoder.loops.choice.compiled_cell)
    model.kernel_options = kernels.KernelOptions(compiled_cell="off", defer_gradients=True)
    self.assertFalse(model.encoder.loops.choice.compiled_cell)
    self.assertTrue(decoder.loops.choice.defer_gradients)
    # No layer holds a choice: the layers' equations do not name the kernels.
    for layer in (decoder.cgru.attention, decoder.state_memory, decoder.cgru):
      self.assertFalse(hasattr(layer, "kernel_choice"), layer.name)

  def test_model_options_and_config(self):
    config = self.model.get_config()
    self.model.kernel_options = kernels.KernelOptions(compiled_cell="off")
    self.assertEqual(self.cell_scopes(), {False})
    self.assertEqual(self.model.get_config(), config)  # how it computes, not what
    model = build_model(tiny_config(decoder="cgru"),
                        kernel_options=kernels.KernelOptions(defer_gradients=True))
    self.assertTrue(model.kernel_options.defer_gradients)
    self.assertEqual(Seq2Seq.from_config(config).kernel_options, kernels.DEFAULT_OPTIONS)

  def test_an_xla_train_step_takes_the_plain_cell(self):
    model = build_model(tiny_config(decoder="cgru"))
    TrainStep(model, FusedAdam(learning_rate=1e-3), tf.distribute.get_strategy(),
              TrainConfig(jit_compile=True))
    self.assertEqual(model.kernel_options.compiled_cell, "off")

  @pytest.mark.slow  # traces two training steps
  def test_the_loss_form_reaches_the_train_step(self):
    losses = {}
    for form in ("sparse", "dense"):
      keras.utils.set_random_seed(3)
      model = build_model(tiny_config(decoder="cgru"))
      optimizer = FusedAdam(learning_rate=1e-3)
      optimizer.build(model.trainable_variables)
      step = TrainStep(model, optimizer, tf.distribute.get_strategy(),
                       TrainConfig(label_smoothing=0.1),
                       objectives.CrossEntropy(0.1, smoothing_labels=form))
      losses[form] = float(step(self.batch)["loss"])
    self.assertAllClose(losses["sparse"], losses["dense"], rtol=1e-5)
    with self.assertRaisesRegex(ValueError, "smoothing_labels='one_hot'"):
      objectives.CrossEntropy(0.1, smoothing_labels="one_hot")


class ProductsTest(tf.test.TestCase):

  def test_matmul_over_any_leading_dims_and_columns(self):
    rng = np.random.RandomState(0)
    w = tf.Variable(rng.normal(size=[4, 6]).astype(np.float32))
    for shape in ([3, 4], [2, 3, 4]):
      x = tf.constant(rng.normal(size=shape).astype(np.float32))
      self.assertAllClose(kernels.matmul(x, w), x @ w, atol=1e-5)
      self.assertAllClose(kernels.matmul(x, w, columns=(2, 6)), x @ w[:, 2:], atol=1e-5)
    with kernels.precision_scope("bfloat16"):
      y = kernels.matmul(x, w)
    self.assertEqual(y.dtype, tf.float32)  # x's dtype; the product's operands were bfloat16
    self.assertAllClose(y, x @ w, atol=0.1)
    self.assertNotAllClose(y, x @ w, atol=1e-6)


class PrecisionScopeStateTest(tf.test.TestCase):
  """The scope is trace-time state: one per thread (tf.distribute runs a replica per thread),
  left as it was after an error."""

  def test_restored_after_an_error(self):
    v = tf.Variable(tf.ones([2, 3]))
    with self.assertRaises(KeyError):
      with kernels.precision_scope("bfloat16"):
        self.assertEqual(kernels.weight(v, tf.float32).dtype, tf.bfloat16)
        raise KeyError("boom")
    self.assertEqual(kernels.weight(v, tf.float32).dtype, tf.float32)

  def test_other_threads_do_not_see_it(self):
    v = tf.Variable(tf.ones([2, 3]))
    seen = []
    with kernels.precision_scope("bfloat16"):
      thread = threading.Thread(target=lambda: seen.append(kernels.weight(v, tf.float32).dtype))
      thread.start()
      thread.join()
      self.assertEqual(kernels.weight(v, tf.float32).dtype, tf.bfloat16)
    self.assertEqual(seen, [tf.float32])


if __name__ == "__main__":
  tf.test.main()
