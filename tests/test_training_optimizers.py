"""FusedAdam (training/optimizers.py) against keras.optimizers.Adam: the same updates with a
learning-rate schedule (dense gradients, as TrainStep hands them over), eager and in a
tf.function, under MirroredStrategy with one and with two replicas; sparse (embedding)
gradients applied as their dense equivalent; checkpoints interchangeable."""

import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.schedules import WarmupSchedule
from tests.waits import SAFETY_NET


def _model():
  """A tiny embedding + dense model with fixed weights."""
  keras.utils.set_random_seed(3)
  embedding = keras.layers.Embedding(11, 4)
  dense = keras.layers.Dense(3)
  ids = tf.constant([[1, 2, 2], [5, 0, 7]])
  dense(embedding(ids))
  return embedding, dense, ids


def _train(optimizer_cls, steps=4, function=False, strategy=None, dense=True):
  strategy = strategy or tf.distribute.get_strategy()
  with strategy.scope():
    embedding, dense, ids = _model()
    variables = embedding.trainable_variables + dense.trainable_variables
    optimizer = optimizer_cls(learning_rate=WarmupSchedule(0.05, "inverse_sqrt", 2))
    optimizer.build(variables)

  def replica_step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(dense(embedding(ids)) - 1.0))
    grads = tape.gradient(loss, variables)  # the embedding's is IndexedSlices
    if dense:
      grads = [tf.convert_to_tensor(g) for g in grads]
    optimizer.apply(grads, variables)
    return loss

  def step():
    return strategy.run(replica_step)

  step = tf.function(step) if function else step
  for _ in range(steps):
    step()
  return [v.numpy() for v in variables], optimizer


# After 4 steps of size ~lr = 0.05 the two implementations differ by float rounding only
# (the kernel's vectorised, fused multiply-adds): ~1e-6 on weights of ~0.1.
TOL = dict(rtol=1e-5, atol=3e-6)


class FusedAdamTest(tf.test.TestCase):

  def test_same_updates_as_keras_adam(self):
    _, dense, _ = _model()
    initial = dense.kernel.numpy()
    for function in (False, True):
      want, _ = _train(keras.optimizers.Adam, function=function)
      got, optimizer = _train(FusedAdam, function=function)
      self.assertEqual(int(optimizer.iterations), 4)
      self.assertGreater(np.abs(want[1] - initial).min(), 0.01)  # the weights did move
      for g, w in zip(got, want):
        self.assertAllClose(g, w, **TOL)

  def test_sparse_gradients_are_applied_densely(self):
    # Standard Adam: every row's moments decay, also rows absent from the batch (keras'
    # Adam updates the moments of IndexedSlices rows only).
    want, _ = _train(FusedAdam)
    got, _ = _train(FusedAdam, dense=False)
    for g, w in zip(got, want):
      self.assertAllClose(g, w, rtol=1e-6, atol=1e-7)

  def test_mirrored_strategy(self):
    cpus = tf.config.list_logical_devices("CPU")
    strategy = tf.distribute.MirroredStrategy(devices=[d.name for d in cpus][:2])
    want, _ = _train(keras.optimizers.Adam, function=True, strategy=strategy)
    got, _ = _train(FusedAdam, function=True, strategy=strategy)
    for g, w in zip(got, want):
      self.assertAllClose(g, w, **TOL)

  @pytest.mark.slow  # starts a process
  def test_two_replicas(self):
    # Two logical CPUs must be configured before TensorFlow starts: in a fresh process.
    code = ("from nmt_tf.training import distribution; distribution.use_logical_cpus(2)\n"
            "import tensorflow as tf, keras\n"
            "from tests import test_training_optimizers as t\n"
            "strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])\n"
            "assert strategy.num_replicas_in_sync == 2\n"
            "want, _ = t._train(keras.optimizers.Adam, function=True, strategy=strategy)\n"
            "got, _ = t._train(t.FusedAdam, function=True, strategy=strategy)\n"
            "print(max(float(abs(g - w).max()) for g, w in zip(got, want)))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=SAFETY_NET, check=False,
                          env={**os.environ, "PYTHONPATH": root})
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertLess(float(proc.stdout.strip().splitlines()[-1]), TOL["atol"])

  def test_checkpoints_are_interchangeable(self):
    _, keras_adam = _train(keras.optimizers.Adam, steps=2)
    path = tf.train.Checkpoint(optimizer=keras_adam).write(
        os.path.join(tempfile.mkdtemp(), "ckpt"))
    _, fused = _train(FusedAdam, steps=1)
    tf.train.Checkpoint(optimizer=fused).read(path).assert_existing_objects_matched()
    self.assertEqual(int(fused.iterations), 2)
    for a, b in zip(keras_adam.variables, fused.variables):
      self.assertAllEqual(a.numpy(), b.numpy())

  def test_amsgrad_falls_back_to_keras(self):
    want, _ = _train(lambda **kw: keras.optimizers.Adam(amsgrad=True, **kw))
    got, _ = _train(lambda **kw: FusedAdam(amsgrad=True, **kw))
    for g, w in zip(got, want):
      self.assertAllClose(g, w, rtol=1e-6, atol=1e-7)

  def test_config_round_trip(self):
    optimizer = FusedAdam(learning_rate=0.01, beta_2=0.98)
    clone = FusedAdam.from_config(optimizer.get_config())
    self.assertIsInstance(clone, FusedAdam)
    self.assertAllClose(clone.beta_2, 0.98)


if __name__ == "__main__":
  tf.test.main()
