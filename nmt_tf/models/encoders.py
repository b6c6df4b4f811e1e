"""Source encoders: birnn (Bahdanau 2015), rnn (Cho 2014; Sutskever 2014 source reversal),
embedding-only ("concatenation") and convolutional (no pooling), docs/EQUATIONS.md "Encoders".

Each maps embedded source x [batch, src_len, e] and mask [batch, src_len] to
  memory  [batch, src_len, out_dim]: annotations h_i (zero at padded positions);
  summary [batch, out_dim]: the fixed context c of the encdec model;
the RNN encoder's `loops` (kernels.TrainingLoops, set by the model where it is built) run its
recurrences.
Sources are left-aligned (real tokens first), so a forward recurrence never sees padding
before a real token; the backward direction reverses each sentence by its own length
(tf.reverse_sequence), so it starts at the sentence's last real token.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import kernels
from nmt_tf.layers import ops
from nmt_tf.layers.gru import GRUCell


def _lengths(mask):
  return tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # [batch]


def _reverse(x, lengths):
  """Reverses the first `lengths[b]` steps of every row b of x [batch, time, ...]."""
  return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)


def _last(x, lengths):
  """x[b, lengths[b] - 1] for x [batch, time, dim] -> [batch, dim]."""
  return tf.gather(x, tf.maximum(lengths - 1, 0), axis=1, batch_dims=1)


def _zero_padding(x, mask):
  return x * tf.expand_dims(tf.cast(mask, x.dtype), -1)


def _check_positive(**values):
  for key, value in values.items():
    if not isinstance(value, int) or value <= 0:
      raise ValueError(f"Received {key}={value!r}; expected a positive integer.")


def _run_cells(cells, projected, initial, loops, drops=None):
  """The cells' states over time, [batch, src_len, units] each, from their input projections:
  their `step` in one loop (`loops.scan`). drops: per cell a recurrent dropout mask
  [batch, units] (layers/gru.py), or None.
  """
  drops = drops or [None] * len(cells)

  def step(x_t, states, t):
    new = [cell.step(xp, h, m) for cell, xp, h, m in zip(cells, x_t, states, drops)]
    return new, new

  outputs, _ = loops.scan(step, projected, initial)
  return outputs


@keras.saving.register_keras_serializable(package="nmt_tf")
class RNNEncoder(keras.layers.Layer):
  """Stacked GRU encoder, uni- or bidirectional.

  bidirectional: h_i = [fwd_i ; bwd_i] (2*units), both directions advanced in one loop;
  summary = [fwd_last ; bwd_first]. Unidirectional: h_i = fwd_i, summary = the last real
  state (Cho 2014); with reverse_source the real tokens are read in reverse order
  (Sutskever 2014); memory is returned in source order (row i is the state just after
  reading x_i, so attention weights line up with source tokens) and the summary is the state
  after reading x_1, the last token read.

  Args:
    units: GRU size per direction.
    num_layers: stacked layers (each reads the previous layer's annotations).
    bidirectional: bool.
    reverse_source: bool, unidirectional only.
    reset_after: GRU reset placement.
    layer_norm: layer-normalized GRUs (layers/gru.py; reset_after only).
    hidden_dropout: recurrent dropout rate while training: one mask per sentence and GRU on
      the state its recurrent kernel reads (layers/gru.py; reset_after only).

  Attribute `loops` (kernels.TrainingLoops): how the recurrences run over the sentence, set
  by the model where it is built.
  """

  loops = kernels.DEFAULT_LOOPS

  def __init__(self, units, num_layers=1, bidirectional=True, reverse_source=False,
               reset_after=True, layer_norm=False, hidden_dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    _check_positive(units=units, num_layers=num_layers)
    if hidden_dropout and not reset_after:
      raise ValueError("Received hidden_dropout with reset_after=False; recurrent dropout "
                       "needs the reset-after GRU.")
    if bidirectional and reverse_source:
      raise ValueError("Received reverse_source=True with bidirectional=True; source reversal "
                       "only applies to the unidirectional rnn encoder.")
    self.units = units
    self.num_layers = num_layers
    self.bidirectional = bool(bidirectional)
    self.reverse_source = bool(reverse_source)
    self.reset_after = bool(reset_after)
    self.layer_norm = bool(layer_norm)
    self.hidden_dropout = float(hidden_dropout)
    # Created only when on, so that a model without keeps the random streams it had.
    if self.hidden_dropout:
      self.state_dropout = keras.layers.Dropout(self.hidden_dropout, name="state_dropout")
    directions = 2 if bidirectional else 1
    self.directions = directions
    # Attributes, not a list: tf.train.Checkpoint does not look into Keras' tracked lists.
    for l in range(num_layers):
      for d in range(directions):
        setattr(self, f"gru_l{l}_d{d}", GRUCell(units, reset_after=reset_after,
                                                layer_norm=layer_norm, name=f"gru_l{l}_d{d}"))
    self.output_dim = directions * units

  @property
  def cells(self):
    """The GRU cells, layer-major: [l0 fwd, (l0 bwd), l1 fwd, ...]."""
    return [getattr(self, f"gru_l{l}_d{d}") for l in range(self.num_layers)
            for d in range(self.directions)]

  def build(self, *args, **kwargs):
    self.built = True  # the GRU cells build on first use

  def call(self, x, mask, training=False):
    lengths = _lengths(mask)
    if self.reverse_source:
      x = _reverse(x, lengths)
    batch = tf.shape(x)[0]
    for layer in range(self.num_layers):
      cells = self.cells[layer * self.directions:(layer + 1) * self.directions]
      inputs = [x] + ([_reverse(x, lengths)] if self.bidirectional else [])
      # each [batch, src_len, 3*units]
      projected = [cell.project_inputs(inp) for cell, inp in zip(cells, inputs)]
      initial = [cell.get_initial_state(batch)[0] for cell in cells]  # h_0 of each
      drops = None
      if training and self.hidden_dropout:  # one mask per sentence and GRU
        drops = [self.state_dropout(tf.ones_like(h), training=True) for h in initial]
      # list of [batch, src_len, units]
      outputs = _run_cells(cells, projected, initial, self.loops, drops)
      if self.bidirectional:
        outputs[1] = _reverse(outputs[1], lengths)  # back to source order
      x = _zero_padding(tf.concat(outputs, axis=-1), mask)  # [batch, src_len, output_dim]
    if self.bidirectional:
      summary = tf.concat([_last(x[..., :self.units], lengths), x[:, 0, self.units:]], -1)
    else:
      summary = _last(x, lengths)  # [batch, units]
      if self.reverse_source:
        x = _reverse(x, lengths)
    return x, summary

  def get_config(self):
    return {
        **super().get_config(), "units": self.units, "num_layers": self.num_layers,
        "bidirectional": self.bidirectional, "reverse_source": self.reverse_source,
        "reset_after": self.reset_after, "layer_norm": self.layer_norm,
        "hidden_dropout": self.hidden_dropout,
    }


@keras.saving.register_keras_serializable(package="nmt_tf")
class EmbeddingEncoder(keras.layers.Layer):
  """h_i = E_s x_i ("concatenation" of the word embeddings); summary = masked mean."""

  def build(self, *args, **kwargs):
    self.built = True

  def call(self, x, mask, training=False):
    memory = _zero_padding(x, mask)
    return memory, ops.masked_mean(memory, mask)


@keras.saving.register_keras_serializable(package="nmt_tf")
class ConvEncoder(keras.layers.Layer):
  """Stacked 1-D convolutions, 'same' padding, no pooling: one column per source word.

  h^l = tanh(Conv1D(h^{l-1})); padded positions are zeroed before every convolution, so a real
  position sees exactly what it would see in an unpadded batch. summary = masked mean.

  Args:
    filters: channels of every convolution (the annotation size).
    kernel_size: odd width of the convolutions.
    num_layers: number of convolutions.
  """

  def __init__(self, filters, kernel_size=3, num_layers=2, **kwargs):
    super().__init__(**kwargs)
    _check_positive(filters=filters, kernel_size=kernel_size, num_layers=num_layers)
    if kernel_size % 2 == 0:
      raise ValueError(f"Received kernel_size={kernel_size}; expected an odd width so that "
                       "'same' padding is centred.")
    self.filters = filters
    self.kernel_size = kernel_size
    self.num_layers = num_layers
    for l in range(num_layers):  # attributes, not a list (see RNNEncoder)
      setattr(self, f"conv{l}", keras.layers.Conv1D(filters, kernel_size, padding="same",
                                                    activation="tanh", name=f"conv{l}"))
    self.output_dim = filters

  @property
  def convs(self):
    return [getattr(self, f"conv{l}") for l in range(self.num_layers)]

  def build(self, *args, **kwargs):
    self.built = True  # the convolutions build on first use

  def call(self, x, mask, training=False):
    for conv in self.convs:
      x = conv(_zero_padding(x, mask))  # [batch, src_len, filters]
    memory = _zero_padding(x, mask)
    return memory, ops.masked_mean(memory, mask)

  def get_config(self):
    return {**super().get_config(), "filters": self.filters, "kernel_size": self.kernel_size,
            "num_layers": self.num_layers}
