"""Embedding tables stored at 1 / sqrt(e) of their scale (Vaswani et al. 2017, Sec. 3.4).

  E y = sqrt(e) E' y,   E' ~ N(0, sigma^2 / e),

for an embedding dimension e and the initial standard deviation sigma of E
(`model.embedding_init_std`). The model computes the same function as with E stored
directly; what changes is how an optimizer moves it. Adam moves every weight by about its
learning rate per step whatever the weight's scale, so E' of scale sigma / sqrt(e) changes
sqrt(e) times faster, relative to its size, than E of scale sigma. This matters when the
table is also the output projection (`model.tie_embeddings`): there W_o = e^{-1/2} E = E'
itself, whose weights then move at the rate of an untied output projection's rather than
sqrt(e) (16 for e = 256) times slower (`model.scale_embeddings`).
"""

import keras


@keras.saving.register_keras_serializable(package="nmt_tf")
class ScaledEmbedding(keras.layers.Embedding):
  """keras.layers.Embedding whose lookups are multiplied by `scale`: ids [...] -> scale E'[ids]
  [..., e]. `embeddings` is the stored table E'; initialise it at 1 / scale of E's scale.

  Args:
    scale: the factor sqrt(e) of the module docstring.
    Other arguments: those of keras.layers.Embedding.
  """

  def __init__(self, input_dim, output_dim, scale=1.0, **kwargs):
    super().__init__(input_dim, output_dim, **kwargs)
    self.scale = float(scale)

  def call(self, inputs):
    return super().call(inputs) * self.scale  # [..., e]

  def get_config(self):
    return {**super().get_config(), "scale": self.scale}
