"""GNMT length and coverage penalties."""

import numpy as np
import tensorflow as tf

from nmt_tf.decoding import coverage_penalty
from nmt_tf.decoding import hypothesis_scores
from nmt_tf.decoding import length_penalty


class PenaltiesTest(tf.test.TestCase):

  def test_length_penalty(self):
    lengths = tf.constant([1, 5, 10])
    self.assertAllClose(length_penalty(lengths, 0.0), [1.0, 1.0, 1.0])
    self.assertAllClose(length_penalty(lengths, 0.6), ((5.0 + np.array([1, 5, 10])) / 6) ** 0.6)

  def test_coverage_penalty_masks_padding(self):
    attention_sum = tf.constant([[1.5, 0.5, 0.0], [0.2, 0.2, 0.0]])  # [batch, src_len]
    mask = tf.sequence_mask([2, 3], 3)
    expected = [0.3 * np.log(0.5), 0.3 * (2 * np.log(0.2) + np.log(1e-10))]
    self.assertAllClose(coverage_penalty(attention_sum, 0.3, mask), expected)
    self.assertAllClose(coverage_penalty(attention_sum, 0.0, mask), [0.0, 0.0])

  def test_hypothesis_scores(self):
    scores = hypothesis_scores(tf.constant([-2.0]), tf.constant([7]),
                               tf.constant([[0.5, 1.0]]), alpha=1.0, beta=0.5)
    self.assertAllClose(scores, [-2.0 / 2.0 + 0.5 * np.log(0.5)])
    self.assertAllClose(hypothesis_scores(tf.constant([-2.0]), tf.constant([7]),
                                          tf.constant([[0.5, 1.0]])), [-2.0])
