"""Forced decoding: the model's log-probability of given translations.

log P(y | x) = sum_{t=1}^{n+1} log p(y_t | y_<t, x), with y_{n+1} = EOS (Bahdanau et al.
2015, Eq. 2), computed with ONE teacher-forced forward pass per batch (`model(...)` on
`target_in` = BOS y_1..y_n), never step by step. Works for a Seq2Seq and a ModelEnsemble.
"""

import dataclasses
from typing import List

import numpy as np
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.data import encode_target


def token_log_probs(model, source, target_in, target_out):
  """log p(y_t | y_<t, x) of each target token.

  Args:
    model: callable({"source", "target_in"}) -> dict with "logits" [batch, tgt_len, vocab].
    source: int32 [batch, src_len] (EOS last, PAD=0).
    target_in: int32 [batch, tgt_len]: BOS y_1 .. y_n, PAD after.
    target_out: int32 [batch, tgt_len]: y_1 .. y_n EOS, PAD after.

  Returns:
    float32 [batch, tgt_len], 0 at padding.
  """
  logits = model({"source": source, "target_in": target_in}, training=False)["logits"]
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [b, tgt, vocab]
  picked = tf.gather(log_probs, target_out, batch_dims=2)  # [batch, tgt_len]
  return tf.where(tf.equal(target_out, special_tokens.PAD_ID), 0.0, picked)


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
    self._score = tf.function(self._score_graph, input_signature=[strings, strings])

  def _score_graph(self, sources, targets):
    source, _ = self.translator.source_ids(sources)
    target_in, target_out = encode_target(self.translator.target_tokenizer, targets)
    target_out = tf.cast(target_out.to_tensor(), tf.int32)  # [batch, tgt_len]
    target_in = tf.cast(target_in.to_tensor(), tf.int32)
    return token_log_probs(self.translator.model, source, target_in, target_out), target_out

  def score(self, sources, targets, batch_size=64):
    """Lists of python strings -> list of ForcedScore (input order)."""
    if len(sources) != len(targets):
      raise ValueError(f"Received {len(sources)} sources and {len(targets)} translations; "
                       "expected one translation per source line.")
    scores = []
    for start in range(0, len(sources), batch_size):
      token_lp, target_out = self._score(
          tf.constant(sources[start:start + batch_size], tf.string),
          tf.constant(targets[start:start + batch_size], tf.string))
      token_lp, mask = token_lp.numpy(), target_out.numpy() != special_tokens.PAD_ID
      for row, row_mask in zip(token_lp, mask):
        values = row[row_mask].astype(np.float64)
        scores.append(ForcedScore(float(values.sum()), int(row_mask.sum()), values.tolist()))
    return scores
