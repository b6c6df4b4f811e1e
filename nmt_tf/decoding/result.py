"""The named result shared by every search strategy."""

from typing import NamedTuple

import tensorflow as tf


class DecodeResult(NamedTuple):
  """Hypotheses returned by `greedy_search`, `beam_search` and `decode`.

  Entries along `nbest` are sorted by decreasing `scores`. A search that found fewer than
  `nbest` distinct hypotheses fills the remaining entries with `scores = log_probs = -inf`,
  `lengths = 0` and zeros elsewhere. Greedy search returns `nbest = 1`.

  Attributes:
    ids: int32 [batch, nbest, max_length]: tokens, EOS included, PAD (0) after EOS.
    lengths: int32 [batch, nbest]: number of tokens, EOS included.
    log_probs: float32 [batch, nbest]: log P(y | x), the sum of the token log-probabilities
      (EOS included) given by the step function, before any penalty.
    scores: float32 [batch, nbest]: the ranking score after penalties,
      `log_probs / lp(lengths) + cp(attention)` (see `penalties.py`).
    attention: float32 [batch, nbest, max_length, src_len]: attention weights of each step
      (row t is the attention computed while emitting token t), zeros after EOS.
    token_log_probs: float32 [batch, nbest, max_length]: log p(y_t | y_<t, x) of each token
      (EOS included), zeros after EOS; their sum is `log_probs`.
  """

  ids: tf.Tensor
  lengths: tf.Tensor
  log_probs: tf.Tensor
  scores: tf.Tensor
  attention: tf.Tensor
  token_log_probs: tf.Tensor
