"""What every decoder shares: teacher-forced `call` and incremental `step` run the same code.

A decoder defines
  precompute(emb)                       step-independent input projections, any leading dims;
  transition(x_t, state, context, t, training) -> (outputs_t, new_state), one target step;
  output_inputs(outputs, emb)           the named inputs of its output layer;
  sequence(x, state, context)           optionally, all training steps at once: the parts
                                        that do not recur computed outside the loop (None:
                                        `transition` in the loop).
`call` precomputes for all target positions, runs `transition` in one graph-mode loop
(`loops.scan`) and applies the output layer once to all steps; `step` does the same for one
position. Hence step-by-step decoding reproduces the teacher-forced logits. The model hands
the decoder its TrainingLoops once, where it is built (`loops`).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import kernels
from nmt_tf.layers.attention import make_attention


class Decoder(keras.layers.Layer):
  """Base class of the decoders (see module docstring).

  Subclasses create `self.output_layer` (called with the dict from `output_inputs`) and
  implement `make_context`, `initial_state`, `precompute`, `transition`, `output_inputs`.

  Attribute `loops` (kernels.TrainingLoops): how the steps run over a sequence, set by the
  model where it is built.
  """

  loops = kernels.DEFAULT_LOOPS

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

  def transition(self, x_t, state, context, t, training):
    raise NotImplementedError

  def output_inputs(self, outputs, emb):
    raise NotImplementedError

  def with_dropout_masks(self, context):
    """The context of a training pass with the dropout masks drawn once per sequence
    (recurrent dropout), or `context` itself for a decoder without."""
    return context

  def sequence(self, x, state, context):
    """Optionally, all of a training pass's steps at once: the outputs `transition` would
    give, stacked [batch, tgt_len, ...], with what does not recur computed outside the loop;
    None = run `transition` in `loops.scan`."""
    return None

  def call(self, emb, context, training=False):
    """Teacher-forced decoding.

    Args:
      emb: [batch, tgt_len, e], embeddings of BOS y_1 .. y_{n-1} (target_in).
      context: from `make_context`.
      training: dropout, sampled hard attention, and `sequence`.

    Returns:
      dict: logits [batch, tgt_len, vocab], attention [batch, tgt_len, src_len] float32,
      log_prob [batch, tgt_len] float32 (hard attention's sampled log alpha, else zeros);
      with hard attention while training also decision_state [batch, tgt_len, units]
      (`decision_states`).
    """
    state = self.initial_state(context, tf.shape(emb)[1])
    if training:
      context = self.with_dropout_masks(context)
    x = self.precompute(emb)
    outputs = self.sequence(x, state, context) if training else None
    if outputs is None:
      step = lambda x_t, s, t: self.transition(x_t, s, context, t, training)
      outputs, _ = self.loops.scan(step, x, state)  # each [batch, tgt_len, ...]
    logits = self.output_layer(self.output_inputs(outputs, emb), training=training)
    result = {"logits": logits, "attention": outputs["attention"], "log_prob": outputs["log_prob"]}
    if training and getattr(self.attention_layer, "mode", "soft") == "hard":
      result["decision_state"] = self.decision_states(outputs, state)
    return result

  @property
  def attention_layer(self):
    """The attention over the source (layers/attention.py), or None (encdec)."""
    return getattr(self, "attention", None)

  def decision_states(self, outputs, state):
    """The state that step t's attention decision is drawn from, before it: s_{t-1}, i.e.
    s_0, then the steps' s shifted by one, [batch, tgt_len, units]. A learned REINFORCE
    baseline b(s_{t-1}) reads it (training/reinforce.py): it does not depend on the decision
    at t, so the estimate stays unbiased."""
    return tf.concat([state["s"][:, tf.newaxis], outputs["s"][:, :-1]], axis=1)

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
