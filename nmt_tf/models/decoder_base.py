"""What every decoder shares: teacher-forced `call` and incremental `step` run the same code.

A decoder defines
  precompute(emb)                       step-independent input projections, any leading dims;
  transition(x_t, state, context, t, training) -> (outputs_t, new_state), one target step;
  output_inputs(outputs, emb)           the named inputs of its output layer;
  sequence(x, state, context, training) optionally, all steps at once through one kernel of
                                        `kernels` with a hand-written backward pass (None:
                                        use `transition`).
`call` precomputes for all target positions, runs `transition` in one graph-mode loop
(layers/recurrence.scan_time) and applies the output layer once to all steps; `step` does the
same for one position. Hence step-by-step decoding reproduces the teacher-forced logits.
The model hands the decoder its training kernels once, where it is built (`use_kernels`).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import kernels
from nmt_tf.layers.attention import make_attention
from nmt_tf.layers.recurrence import scan_time


class Decoder(keras.layers.Layer):
  """Base class of the decoders (see module docstring).

  Subclasses create `self.output_layer` (called with the dict from `output_inputs`) and
  implement `make_context`, `initial_state`, `precompute`, `transition`, `output_inputs`.

  Attribute `kernel_choice` (kernels.KernelChoice): the training kernels, set by `use_kernels`.
  """

  kernel_choice = kernels.DEFAULT_CHOICE

  def build(self, *args, **kwargs):
    # Sub-layers build lazily on first use (step 0 is run outside the time loop).
    self.built = True

  def source_attention(self, units, memory_dim, attention, attention_units, attention_mode,
                       hard_inference):
    """The attention layer over the annotations (layers/attention.py `make_attention`; the
    query has `units` dims, attention_units defaults to units). Its settings are kept for
    get_config (`attention_config`)."""
    self.attention_config = {"attention": attention, "attention_units": attention_units or units,
                             "attention_mode": attention_mode, "hard_inference": hard_inference}
    return make_attention(attention, attention_units or units, units, memory_dim, attention_mode,
                          hard_inference)

  def use_kernels(self, choice):
    """Trains with `choice` (kernels.KernelChoice, resolved by the model): kept here and handed
    to the layers that score with tanh (`scoring_layers`)."""
    self.kernel_choice = choice
    for layer in self.scoring_layers():
      layer.kernel_choice = choice

  def scoring_layers(self):
    """The layers whose call takes the training kernel of tanh scores: the attention."""
    return [self.attention] if hasattr(self, "attention") else []

  def make_context(self, memory, summary, mask):
    """Constant decoding context from the encoder: memory [batch, src_len, mem_dim],
    summary [batch, mem_dim], mask [batch, src_len] -> dict of tensors (batch leading)."""
    raise NotImplementedError

  def initial_state(self, context, max_length):
    """State before the first step, for at most `max_length` steps (dict, batch leading)."""
    raise NotImplementedError

  def precompute(self, emb):
    raise NotImplementedError

  def transition(self, x_t, state, context, t, training):
    raise NotImplementedError

  def output_inputs(self, outputs, emb):
    raise NotImplementedError

  def with_dropout_masks(self, context):
    """The context of a training pass with the dropout masks drawn once per sequence
    (recurrent dropout), or `context` itself for a decoder without."""
    return context

  def sequence(self, x, state, context, training):
    """Optionally, all of `call`'s steps at once with a hand-written backward pass, asked for
    while training only (unless the kernel choice takes autodiff for the decoder): the
    outputs `transition` would give, stacked [batch, tgt_len, ...]; None = run it in
    scan_time."""
    return None

  def call(self, emb, context, training=False):
    """Teacher-forced decoding.

    Args:
      emb: [batch, tgt_len, e], embeddings of BOS y_1 .. y_{n-1} (target_in).
      context: from `make_context`.
      training: dropout, sampled hard attention, and the training kernels.

    Returns:
      logits [batch, tgt_len, vocab], attention [batch, tgt_len, src_len] float32,
      log_prob [batch, tgt_len] float32 (hard attention's sampled log alpha, else zeros).
    """
    state = self.initial_state(context, tf.shape(emb)[1])
    if training:
      context = self.with_dropout_masks(context)
    x = self.precompute(emb)
    outputs = None
    if training and self.kernel_choice.manual_backward:
      outputs = self.sequence(x, state, context, training)
    if outputs is None:
      step = lambda x_t, s, t: self.transition(x_t, s, context, t, training)
      # each [batch, tgt_len, ...]
      outputs, _ = scan_time(step, x, state, defer=self.kernel_choice.defer_gradients)
    logits = self.output_layer(self.output_inputs(outputs, emb), training=training)
    return logits, outputs["attention"], outputs["log_prob"]

  def step(self, emb_t, state, context, time, vocab=None):
    """One decoding step (inference mode).

    Args:
      emb_t: [batch, e], embedding of the previous token y_{t-1}.
      state: from `initial_state` or the previous `step`.
      context: from `make_context`.
      time: scalar int32, 0 at the first step.
      vocab: optional int32 [n], a shortlist: the logits of those words only.

    Returns:
      logits [batch, vocab] (or [batch, n]), attention [batch, src_len] float32, new state.
    """
    outputs, state = self.transition(self.precompute(emb_t), state, context, time, False)
    logits = self.output_layer(self.output_inputs(outputs, emb_t), training=False,
                               vocab=vocab)
    return logits, outputs["attention"], state
