"""Deep output layer and the initial-state bridge.

DeepOutput (docs/EQUATIONS.md, "Output layer"; Pascanu et al. 2014, as in dl4mt/Nematus):
  logits = W_o tanh(sum_k W_k x_k + b) + b_o,   W_o: V x e
with x_k among s_t, E y_{t-1}, c_t (or d_t, s~_t for the self-attentive decoders).
Tied (Press and Wolf 2017; `tie`): W_o = e^{-1/2} E, the target embedding table E [V, e],
scaled as T5 scales its tied output projection, so that the N(0, 1) embeddings
(ModelConfig.embedding_init_std) start with logits of unit scale.
Bridge: s_0 = tanh(W_init x + b), x = masked mean of h (or the fixed context c of encdec).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops


class _TiedOutput:
  """What DeepOutput and OutputProjection share when their W_o is an embedding table: tying,
  the check before building, and the logits e^{-1/2} x E^T + b_o."""

  def _init_tied(self, tied):
    self.tied = bool(tied)
    self._table = None  # () -> the tied embedding table [V, e]; a function, not tracked
    self._table_scale = 1.0

  def _tie(self, embedding, units):
    """Uses `embedding` (a keras Embedding of V x `units`) as W_o."""
    if (embedding.input_dim, embedding.output_dim) != (self.vocab_size, units):
      raise ValueError(f"Received an embedding of {embedding.input_dim} x "
                       f"{embedding.output_dim} to tie to an output layer of {self.vocab_size} "
                       f"words x {units} inputs; they must match.")
    self.tied = True
    self._table = lambda: embedding.embeddings
    self._table_scale = getattr(embedding, "scale", 1.0)  # E = scale E' (ScaledEmbedding)

  def _check_tied(self, units):
    """Before building a tied layer whose W_o multiplies `units`-dim inputs."""
    if self._table is None:
      raise ValueError(f"{type(self).__name__}(tied=True) needs tie(embedding) before it "
                       "builds.")
    width = self._table().shape[-1]
    if units != width:
      raise ValueError(f"Received inputs of {units} units for an output projection tied to "
                       f"embeddings of {width}; they must match.")

  def _tied_logits(self, x, bias, vocab=None):
    """e^{-1/2} x E^T + b_o: x [..., e] -> [..., V] (or the words `vocab` [n] only). A table
    stored as E' = E / sqrt(e) (layers/embedding.py) is W_o itself: x E'^T + b_o."""
    factor = float(x.shape[-1]) ** -0.5 * self._table_scale
    if abs(factor - 1.0) > 1e-6:
      x = x * factor
    return ops.project_on_table(x, self._table(), bias, vocab)


@keras.saving.register_keras_serializable(package="nmt_tf")
class DeepOutput(_TiedOutput, keras.layers.Layer):
  """logits = W_o tanh(sum_k W_k x_k + b) + b_o over named inputs x_k of any leading dims.

  Args:
    input_names: names of the inputs x_k (the keys of the dict passed to `call`).
    hidden_units: e, the size of the tanh layer.
    vocab_size: V.
    dropout: rate applied to the tanh layer while training.
    tied: W_o is the embedding table given to `tie` (before the layer builds), scaled by
      e^{-1/2}; the layer then has no W_o of its own.
  """

  def __init__(self, input_names, hidden_units, vocab_size, dropout=0.0, tied=False,
               **kwargs):
    super().__init__(**kwargs)
    if not input_names:
      raise ValueError("Received input_names=(); expected at least one input name.")
    for key, value in (("hidden_units", hidden_units), ("vocab_size", vocab_size)):
      if not isinstance(value, int) or value <= 0:
        raise ValueError(f"Received {key}={value!r}; expected a positive integer.")
    if not 0.0 <= dropout < 1.0:
      raise ValueError(f"Received dropout={dropout!r}; expected a rate in [0, 1).")
    self.input_names = tuple(input_names)
    self.hidden_units = hidden_units
    self.vocab_size = vocab_size
    self.dropout = dropout
    self.dropout_layer = keras.layers.Dropout(dropout)
    self._init_tied(tied)

  def tie(self, embedding):
    """Uses `embedding` (a keras Embedding of V x hidden_units) as W_o."""
    self._tie(embedding, self.hidden_units)

  def build(self, input_shapes):
    missing = set(self.input_names) - set(input_shapes)
    if missing:
      raise ValueError(f"DeepOutput expected inputs {self.input_names}; missing {sorted(missing)}.")
    # One attribute per kernel (not a dict): tf.train.Checkpoint does not look into Keras'
    # tracked dicts and lists, so weights kept there would be missing from checkpoints.
    for name in self.input_names:
      setattr(self, f"kernel_{name}",
              self.add_weight(name=f"W_{name}", shape=(input_shapes[name][-1], self.hidden_units),
                              initializer="glorot_uniform"))
    self.bias = self.add_weight(name="bias", shape=(self.hidden_units,), initializer="zeros")
    if self.tied:
      self._check_tied(self.hidden_units)
    else:
      self.output_kernel = self.add_weight(name="W_o", shape=(self.hidden_units,
                                                               self.vocab_size),
                                           initializer="glorot_uniform")
    self.output_bias = self.add_weight(name="b_o", shape=(self.vocab_size,), initializer="zeros")

  @property
  def kernels(self):
    """{input name: W_k [dim_k, hidden_units]}."""
    return {name: getattr(self, f"kernel_{name}") for name in self.input_names}

  def hidden(self, inputs, training=False):
    """tanh(sum_k W_k x_k + b): dict of [..., dim_k] -> [..., hidden_units]."""
    pre = self.bias
    for name in self.input_names:
      pre = ops.project(inputs[name], self.kernels[name]) + tf.cast(pre, inputs[name].dtype)
    return self.dropout_layer(tf.tanh(pre), training=training)

  def call(self, inputs, training=False, vocab=None):
    """Dict of named inputs [..., dim_k] -> logits [..., vocab_size], or with `vocab` (int32
    [n], a shortlist) the logits of those words only, [..., n]."""
    hidden = self.hidden(inputs, training)  # [..., e]
    if self.tied:
      return self._tied_logits(hidden, self.output_bias, vocab)
    return ops.project(hidden, self.output_kernel, self.output_bias, vocab)

  def get_config(self):
    return {
        **super().get_config(),
        "input_names": list(self.input_names),
        "hidden_units": self.hidden_units,
        "vocab_size": self.vocab_size,
        "dropout": self.dropout,
        "tied": self.tied,
    }


@keras.saving.register_keras_serializable(package="nmt_tf")
class Bridge(keras.layers.Layer):
  """s_0 = tanh(W_init x + b); with a mask, x is the masked mean of memory over real positions.

  Args:
    units: the decoder state size d.
  """

  def __init__(self, units, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    self.dense = keras.layers.Dense(units, activation="tanh", name="W_init")

  def call(self, x, source_mask=None):
    """x [batch, dim] -> [batch, units]; or x [batch, src_len, dim] with source_mask
    [batch, src_len] (masked mean over real positions first)."""
    if source_mask is not None:
      x = ops.masked_mean(x, source_mask)  # [batch, dim]
    return ops.dense(self.dense, x)  # [batch, units]

  def get_config(self):
    return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="nmt_tf")
class OutputProjection(_TiedOutput, keras.layers.Layer):
  """logits = W_o dropout(x) + b_o over any leading dims (Luong et al. 2015, eq. 6).

  Args:
    vocab_size: V.
    dropout: rate applied to x while training.
    tied: W_o is e^{-1/2} times the embedding table given to `tie`, as in DeepOutput.
  """

  def __init__(self, vocab_size, dropout=0.0, tied=False, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(vocab_size, int) or vocab_size <= 0:
      raise ValueError(f"Received vocab_size={vocab_size!r}; expected a positive integer.")
    if not 0.0 <= dropout < 1.0:
      raise ValueError(f"Received dropout={dropout!r}; expected a rate in [0, 1).")
    self.vocab_size = vocab_size
    self.dropout = dropout
    self.dropout_layer = keras.layers.Dropout(dropout)
    self._init_tied(tied)

  def tie(self, embedding):
    """Uses `embedding` (a keras Embedding of V x the input size) as W_o."""
    self._tie(embedding, embedding.output_dim)

  def build(self, input_shape):
    if self.tied:
      self._check_tied(input_shape[-1])
    else:
      self.kernel = self.add_weight(name="W_o", shape=(input_shape[-1], self.vocab_size),
                                    initializer="glorot_uniform")
    self.bias = self.add_weight(name="b_o", shape=(self.vocab_size,), initializer="zeros")

  def call(self, x, training=False, vocab=None):
    """x [..., in] -> logits [..., vocab_size], or [..., n] for the words `vocab` [n] only."""
    x = self.dropout_layer(x, training=training)
    if self.tied:
      return self._tied_logits(x, self.bias, vocab)
    return ops.project(x, self.kernel, self.bias, vocab)

  def get_config(self):
    return {**super().get_config(), "vocab_size": self.vocab_size, "dropout": self.dropout,
            "tied": self.tied}
