"""The lexical model of Nguyen and Chiang (2018), "Improving Lexical Choice in Neural Machine
Translation" (NAACL), Sec. 3: the source embeddings, weighted by the attention, predict the
target word directly, beside the decoder's output layer.

  h^l_t = tanh(sum_i alpha_{t,i} f_i)          f_i: the embedding of source word i
  hh^l_t = tanh(W h^l_t) + h^l_t               one layer with a skip connection
  logits_t += W^l hh^l_t + b^l

On small data it lets rare source words reach their translations without passing through the
recurrent states (Sennrich and Zhang 2019 kept it in their low-resource RNN recipe).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops


@keras.saving.register_keras_serializable(package="nmt_tf")
class LexicalModel(keras.layers.Layer):
  """logits^l = W^l (tanh(W h) + h) + b^l with h = tanh(alpha . F) (see the module docstring).

  Args:
    vocab_size: V, the target vocabulary.
  """

  def __init__(self, vocab_size, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(vocab_size, int) or vocab_size <= 0:
      raise ValueError(f"Received vocab_size={vocab_size!r}; expected a positive integer.")
    self.vocab_size = vocab_size

  def build(self, attention_shape, source_embeddings_shape):
    del attention_shape
    dim = source_embeddings_shape[-1]
    self.kernel = self.add_weight(name="W", shape=(dim, dim), initializer="glorot_uniform")
    self.output_kernel = self.add_weight(name="W_l", shape=(dim, self.vocab_size),
                                         initializer="glorot_uniform")
    self.output_bias = self.add_weight(name="b_l", shape=(self.vocab_size,),
                                       initializer="zeros")

  def call(self, attention, source_embeddings, vocab=None):
    """attention [batch, src_len] (one step) or [batch, tgt_len, src_len], source_embeddings
    F [batch, src_len, e] -> logits [batch, vocab] or [batch, tgt_len, vocab]; with `vocab`
    (int32 [n], a shortlist) the logits of those words only."""
    alpha = tf.cast(attention, source_embeddings.dtype)
    one_step = alpha.shape.rank == 2
    if one_step:
      alpha = alpha[:, tf.newaxis]  # [batch, 1, src_len]
    h = tf.tanh(tf.matmul(alpha, source_embeddings))  # [batch, tgt_len, e]
    h = tf.tanh(ops.project(h, self.kernel)) + h  # [batch, tgt_len, e]
    logits = ops.project(h, self.output_kernel, self.output_bias, vocab)  # [batch, tgt_len, V]
    return logits[:, 0] if one_step else logits

  def get_config(self):
    return {**super().get_config(), "vocab_size": self.vocab_size}
