"""Caption generation with attention (Xu et al. 2015): the Seq2Seq model with an image source.

The source is an image batch [batch, size, size, 3] (float, values in [0, 1]) instead of
word ids; models/image_encoder.py turns it into annotation vectors a_i [batch, L, D] and a
mask of L real cells. Every decoder of nmt_tf then attends over them through the same
`context` as over a sentence: soft attention (c_t = sum_i alpha_ti a_i) or hard attention
(s_t ~ Categorical(alpha_t), c_t = a_{s_t}, trained with REINFORCE), its initial state
computed from the mean annotation. Search, scoring, checkpoints and TensorBoard see the same
`encode`, `initial_state` and `step` as for translation.
"""

import keras
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.layers import ops
from nmt_tf.models.seq2seq import Seq2Seq


@keras.saving.register_keras_serializable(package="nmt_tf")
class ImageCaptioner(Seq2Seq):
  """A Seq2Seq whose encoder is models.image_encoder.ImageEncoder (model.encoder="image").

  Inputs: `source` float [batch, size, size, 3] in [0, 1] and `target_in` [batch, tgt_len]
  (BOS y_1 .. y_{n-1}); attention maps are [batch, tgt_len, L], L cells row by row.
  """

  def _source_embedding(self):
    return None  # an image has no words

  def encode(self, source, training=False):
    """images [batch, size, size, 3] -> decoding context (dict of batch-leading tensors)."""
    with ops.forward_pass(self.matmul_dtype):
      # [batch, L, D], [batch, L], [batch, D]
      memory, mask, summary = self.encoder(source, training=training)
      return self.decoder.make_context(memory, summary, mask)

  def build_with_dummy_batch(self):
    """Creates every weight by running one image of the configured size."""
    size = self.model_config.image_size
    self.call({"source": tf.zeros([1, size, size, 3], tf.float32),
               "target_in": tf.constant([[special_tokens.BOS_ID, 4]], tf.int32)})
    self.built = True
