"""Forced decoding of python string lists in batches (`run.py score`).

The scores are `Translator.score`'s: log P(y | x) = sum_{t=1}^{n+1} log p(y_t | y_<t, x), with
y_{n+1} = EOS (Bahdanau et al. 2015, Eq. 2), from ONE teacher-forced forward pass per batch,
never step by step; for a Seq2Seq and a ModelEnsemble alike. This module only batches the
lines, compiles the pass once and turns the tensors into python values.
"""

import dataclasses
from typing import List

import numpy as np
import tensorflow as tf


@dataclasses.dataclass
class ForcedScore:
  """Scores of one sentence pair.

  Attributes:
    log_prob: log P(y | x), EOS included.
    num_tokens: target tokens scored (EOS included).
    token_log_probs: log p(y_t | ...) per token.
  """

  log_prob: float
  num_tokens: int
  token_log_probs: List[float]

  @property
  def per_token(self):
    return self.log_prob / max(self.num_tokens, 1)


class ForcedScorer:
  """Scores (source, translation) string pairs in batches with a compiled forward pass.

  Args:
    translator: an nmt_tf.inference.Translator (its model and tokenizers, source cut and
      reversal are reused, so scores match what the translator decodes).
  """

  def __init__(self, translator):
    self.translator = translator
    strings = tf.TensorSpec([None], tf.string)
    self._score = tf.function(self._score_graph, input_signature=[strings, strings],
                                autograph=False)

  def _score_graph(self, sources, targets):
    scores = self.translator.score(sources, targets)
    return scores["token_log_prob"], scores["target_length"]  # [batch, tgt_len], [batch]

  def score(self, sources, targets, batch_size=64):
    """Lists of python strings -> list of ForcedScore (input order)."""
    if len(sources) != len(targets):
      raise ValueError(f"Received {len(sources)} sources and {len(targets)} translations; "
                       "expected one translation per source line.")
    scores = []
    for start in range(0, len(sources), batch_size):
      token_lp, lengths = self._score(
          tf.constant(sources[start:start + batch_size], tf.string),
          tf.constant(targets[start:start + batch_size], tf.string))
      for row, length in zip(token_lp.numpy(), lengths.numpy()):
        values = row[:length].astype(np.float64)
        scores.append(ForcedScore(float(values.sum()), int(length), values.tolist()))
    return scores
