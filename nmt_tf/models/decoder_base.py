"""What every decoder shares: teacher-forced `call` and incremental `step` run the same code.

A decoder defines
  precompute(emb)                       step-independent input projections, any leading dims;
  transition(x_t, state, context, t, training, kernel_options) -> (outputs_t, new_state),
                                        one target step;
  output_inputs(outputs, emb)           the named inputs of its output layer;
  sequence(x, state, context, training, kernel_options)
                                        optionally, all steps at once (None: use `transition`).
`call` precomputes for all target positions, runs `transition` in one graph-mode loop
(layers/recurrence.scan_time) and applies the output layer once to all steps; `step` does the
same for one position. Hence step-by-step decoding reproduces the teacher-forced logits.
kernel_options (kernels.KernelOptions, from the model) choose the speed paths of training.
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
  """

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

  def make_context(self, memory, summary, mask):
    """Constant decoding context from the encoder: memory [batch, src_len, mem_dim],
    summary [batch, mem_dim], mask [batch, src_len] -> dict of tensors (batch leading)."""
    raise NotImplementedError

  def initial_state(self, context, max_length):
    """State before the first step, for at most `max_length` steps (dict, batch leading)."""
    raise NotImplementedError

  def precompute(self, emb):
    raise NotImplementedError

  def transition(self, x_t, state, context, t, training, kernel_options=kernels.DEFAULT_OPTIONS):
    raise NotImplementedError

  def output_inputs(self, outputs, emb):
    raise NotImplementedError

  def sequence(self, x, state, context, training, kernel_options):
    """Optionally, all of `call`'s steps at once with a hand-written backward pass, asked for
    while training only (unless kernel_options.gru_backward takes autodiff for the decoder):
    the outputs `transition` would give, stacked [batch, tgt_len, ...]; None = run it in
    scan_time."""
    return None

  def call(self, emb, context, training=False, kernel_options=kernels.DEFAULT_OPTIONS):
    """Teacher-forced decoding.

    Args:
      emb: [batch, tgt_len, e], embeddings of BOS y_1 .. y_{n-1} (target_in).
      context: from `make_context`.
      training: dropout, sampled hard attention, and the training kernels.
      kernel_options: kernels.KernelOptions.

    Returns:
      logits [batch, tgt_len, vocab], attention [batch, tgt_len, src_len] float32,
      log_prob [batch, tgt_len] float32 (hard attention's sampled log alpha, else zeros).
    """
    state = self.initial_state(context, tf.shape(emb)[1])
    x = self.precompute(emb)
    outputs = None
    if training and kernel_options.manual_backward("decoder"):
      outputs = self.sequence(x, state, context, training, kernel_options)
    if outputs is None:
      step = lambda x_t, s, t: self.transition(x_t, s, context, t, training, kernel_options)
      # each [batch, tgt_len, ...]
      outputs, _ = scan_time(step, x, state, defer=kernel_options.defer_gradients)
    logits = self.output_layer(self.output_inputs(outputs, emb), training=training)
    return logits, outputs["attention"], outputs["log_prob"]

  def step(self, emb_t, state, context, time):
    """One decoding step (inference mode).

    Args:
      emb_t: [batch, e], embedding of the previous token y_{t-1}.
      state: from `initial_state` or the previous `step`.
      context: from `make_context`.
      time: scalar int32, 0 at the first step.

    Returns:
      logits [batch, vocab], attention [batch, src_len] float32, new state.
    """
    outputs, state = self.transition(self.precompute(emb_t), state, context, time, False)
    logits = self.output_layer(self.output_inputs(outputs, emb_t), training=False)
    return logits, outputs["attention"], state
