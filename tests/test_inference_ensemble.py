"""Ensembles of step functions."""

import numpy as np
import tensorflow as tf

from nmt_tf.decoding import beam_search
from nmt_tf.decoding import decode
from nmt_tf.inference.ensemble import ensemble_step_fn


def make_member(scale):
  """A fake model: logits = scale * table[prev]; its state counts the steps."""

  def step_fn(ids, state, context, time):
    del time
    logits = scale * tf.gather(context["table"], ids, batch_dims=1)  # [rows, vocab]
    attention = tf.nn.softmax(scale * tf.gather(context["att"], ids, batch_dims=1))
    return logits, attention, {"steps": state["steps"] + 1}

  return step_fn


class EnsembleTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.batch, self.vocab = 2, 6
    self.context = {"table": tf.constant(rng.normal(size=[2, 6, 6]), tf.float32),
                    "att": tf.constant(rng.normal(size=[2, 6, 3]), tf.float32)}
    self.state = {"steps": tf.zeros([2], tf.int32)}

  def test_averages(self):
    members = [make_member(1.0), make_member(3.0)]
    ids = tf.constant([2, 4])
    outputs = [fn(ids, self.state, self.context, 0) for fn in members]
    log_probs = np.stack([tf.nn.log_softmax(out[0]).numpy() for out in outputs])
    for average, expected in [
        ("log_probs", tf.nn.log_softmax(log_probs.mean(0)).numpy()),
        ("probs", np.log(np.exp(log_probs).mean(0)))]:
      step_fn = ensemble_step_fn(members, average=average)
      combined, attention, states = step_fn(ids, (self.state, self.state),
                                            (self.context, self.context), 0)
      self.assertAllClose(combined, expected, atol=1e-6)
      self.assertAllClose(tf.reduce_logsumexp(combined, axis=-1), [0.0, 0.0], atol=1e-6)
      self.assertAllClose(attention, (outputs[0][1] + outputs[1][1]) / 2)
      self.assertIsInstance(states, tuple)
      self.assertAllEqual(states[1]["steps"], [1, 1])

  def test_ensemble_of_copies_decodes_like_one_model(self):
    member = make_member(2.0)
    single = beam_search(member, self.state, self.context, 2, 3, 5, nbest=2)
    ensemble = decode(ensemble_step_fn([member, member]), (self.state, self.state),
                      (self.context, self.context), beam_size=3, nbest=2, max_length=5)
    for got, expected in zip(ensemble, single):
      self.assertAllClose(got, expected, atol=1e-5)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "non-empty sequence of callables"):
      ensemble_step_fn([])
    with self.assertRaisesRegex(ValueError, "average='max'"):
      ensemble_step_fn([make_member(1.0)], average="max")
    step_fn = ensemble_step_fn([make_member(1.0), make_member(2.0)])
    with self.assertRaisesRegex(ValueError, "expected one per model"):
      step_fn(tf.constant([2, 2]), (self.state,), (self.context,), 0)
