"""The conditional-GRU decoder of dl4mt/Nematus and the self-attentive decoders built on it
(Werlen et al. 2018, appendix A.3), docs/EQUATIONS.md "cgru" and "Self-attentive residual decoder".

variant:
  cgru:                    logits = W_o tanh(W_st s_t + W_yt E y_{t-1} + W_ct c_t)
  self_attentive_residual: E y_{t-1} replaced by d_t, the avg or cavg of E y_1..E y_{t-1}
                           (d_1 = 0; A.3.1)
  memory_rnn:              GRU1 reads s~_t = sum_{i=0}^{t-1} a_i s_i instead of s_{t-1},
                           queried with s_{t-1} (A.3.2)
  self_attentive_rnn:      the cgru recurrence; W_mt s~_t inside the output tanh, with
                           s~_t = sum_{i=1}^{t-1} a_i s_i queried with s_t (s~_1 = 0; A.3.3)
s_0 = tanh(W_init mean(h)) over real source positions.
"""

import keras
import tensorflow as tf

from nmt_tf.layers.conditional_gru import ConditionalGRUCell
from nmt_tf.layers.deep_output import Bridge, DeepOutput
from nmt_tf.layers.self_attention import SelfAttentiveResidual, StateAttention, StateMemory
from nmt_tf.models.decoder_base import Decoder

VARIANTS = ("cgru", "self_attentive_residual", "memory_rnn", "self_attentive_rnn")


@keras.saving.register_keras_serializable(package="nmt_tf")
class CGRUDecoder(Decoder):
  """cGRU decoder with deep output, optionally self-attentive (see module docstring).

  Args:
    units: decoder state size d.
    vocab_size: target vocabulary V.
    output_units: hidden size e of the deep output.
    memory_dim: annotation size.
    embedding_dim: target embedding size (the size of d_t).
    variant: one of VARIANTS.
    attention, attention_units, attention_mode, hard_inference: the source attention.
    summary: "avg" or "cavg" (self_attentive_residual).
    summary_units: hidden size of the cavg score and of the state-memory score.
    dropout: deep-output dropout rate.
    layer_norm: layer-normalized GRUs in the cGRU (Nematus).
    hidden_dropout: recurrent dropout rate of the cGRU's GRUs while training, one mask per
      sentence and GRU (layers/gru.py; Nematus' dropout_hidden).
    transition_depth: GRU transitions per target step (layers/conditional_gru.py), >= 2.
  """

  def __init__(self, units, vocab_size, output_units, memory_dim, embedding_dim, variant="cgru",
               attention="additive", attention_units=None, attention_mode="soft",
               hard_inference="expectation", summary="avg", summary_units=None, dropout=0.0,
               layer_norm=False, hidden_dropout=0.0, transition_depth=2, **kwargs):
    super().__init__(**kwargs)
    if variant not in VARIANTS:
      raise ValueError(f"Received variant={variant!r}; expected one of {VARIANTS}.")
    self.units = units
    self.vocab_size = vocab_size
    self.output_units = output_units
    self.memory_dim = memory_dim
    self.embedding_dim = embedding_dim
    self.variant = variant
    self.summary = summary
    self.summary_units = summary_units or units
    self.dropout = dropout
    attention_layer = self.source_attention(units, memory_dim, attention, attention_units,
                                            attention_mode, hard_inference)
    self.layer_norm = bool(layer_norm)
    self.hidden_dropout = float(hidden_dropout)
    if self.hidden_dropout:  # created only when on: a model without keeps its random streams
      self.state_dropout = keras.layers.Dropout(self.hidden_dropout, name="state_dropout")
    self.transition_depth = transition_depth
    self.cgru = ConditionalGRUCell(units, attention=attention_layer, layer_norm=layer_norm,
                                   transition_depth=transition_depth, name="cgru")
    self.bridge = Bridge(units, name="bridge")
    self.uses_summary = variant == "self_attentive_residual"
    self.uses_memory = variant == "memory_rnn"  # s~ feeds the recurrence
    self.uses_state_attention = variant == "self_attentive_rnn"  # s~ feeds the output
    names = ["state", "summary" if self.uses_summary else "prev_embedding", "context"]
    if self.uses_summary:
      self.target_summary = SelfAttentiveResidual(summary, self.summary_units,
                                                  name="target_summary")
    if self.uses_memory:
      self.state_memory = StateMemory(self.summary_units, name="state_memory")
    if self.uses_state_attention:
      self.state_attention = StateAttention(self.summary_units, name="state_attention")
      names.append("state_summary")
    self.output_layer = DeepOutput(names, output_units, vocab_size, dropout, name="deep_output")

  def make_context(self, memory, summary, mask):
    keys = self.cgru.attention.precompute_keys(memory)
    return {"memory": memory, "keys": keys, "mask": mask}

  def with_dropout_masks(self, context):
    """With hidden_dropout: the masks [batch, units] of the cGRU's GRUs as "drops"."""
    if not self.hidden_dropout:
      return context
    memory = context["memory"]
    ones = tf.ones([tf.shape(memory)[0], self.units], memory.dtype)
    return {**context, "drops": tuple(self.state_dropout(ones, training=True)
                                      for _ in range(self.transition_depth))}

  def initial_state(self, context, max_length):
    s0 = self.bridge(context["memory"], source_mask=context["mask"])  # [batch, units]
    state = {"s": s0}
    if self.uses_summary:
      state["summary"] = self.target_summary.initial_state(tf.shape(s0)[0],
                                                           self.embedding_dim)
    if self.uses_memory:
      state["memory"] = self.state_memory.initial_state(s0, max_length)
    if self.uses_state_attention:
      state["memory"] = self.state_attention.initial_state(s0, max_length)
    return state

  def precompute(self, emb):
    x = {"gru": self.cgru.project_inputs(emb)}  # [..., 3*units]
    if self.uses_summary:
      x["emb"] = emb
      x["score"] = self.target_summary.scores(emb)  # [...] float32
    return x

  def recurrence(self, x_t, state, context, t, training):
    """The recurrent part of step t: the cGRU, which the memory RNN feeds with s~_t.
    (outputs_t, new_state) with the state's "s" (and the memory RNN's "memory")."""
    s_prev = state["s"]
    new_state = {}
    if self.uses_memory:
      # s~_t [batch, units]
      s_prev, _ = self.state_memory(s_prev, state["memory"], t, training=training)
    s, c, alpha, log_prob = self.cgru.step(x_t["gru"], s_prev, context["memory"],
                                           context["keys"], context["mask"], training=training,
                                           drops=context.get("drops"),
                                           expect=context.get("expect"))
    outputs = {"s": s, "context": c, "attention": alpha, "log_prob": log_prob}
    new_state["s"] = s
    if self.uses_memory:
      new_state["memory"] = self.state_memory.write(state["memory"], s, t + 1)
    return outputs, new_state

  def transition(self, x_t, state, context, t, training):
    outputs, new_state = self.recurrence(x_t, state, context, t, training)
    if self.uses_state_attention:
      outputs["s_tilde"], new_state["memory"] = self.state_attention.step(outputs["s"],
                                                                          state["memory"], t)
    if self.uses_summary:
      outputs["d"], new_state["summary"] = self.target_summary.step(
          x_t["emb"], state["summary"], t, score=x_t["score"])
    return outputs, new_state

  def sequence(self, x, state, context):
    """The self-attentive variants' training steps: the recurrence in one loop; the target
    summary d_t, which does not depend on the states, and the self-attentive RNN's s~_t,
    which the recurrence does not read, for all steps at once with causal masks (the same
    layers' `call`, no loop)."""
    if not (self.uses_summary or self.uses_state_attention):
      return None
    step = lambda x_t, s, t: self.recurrence(x_t, s, context, t, True)
    outputs, _ = self.loops.scan(step, {"gru": x["gru"]}, {"s": state["s"]})
    if self.uses_state_attention:
      outputs["s_tilde"] = self.state_attention(outputs["s"])  # [batch, tgt_len, units]
    if self.uses_summary:
      outputs["d"] = self.target_summary(x["emb"], scores=x["score"])  # [batch, tgt_len, emb_dim]
    return outputs

  @property
  def attention_layer(self):
    return self.cgru.attention

  def output_inputs(self, outputs, emb):
    inputs = {"state": outputs["s"], "context": outputs["context"]}
    if self.uses_summary:
      inputs["summary"] = outputs["d"]
    else:
      inputs["prev_embedding"] = emb
    if self.variant == "self_attentive_rnn":
      inputs["state_summary"] = outputs["s_tilde"]
    return inputs

  def get_config(self):
    return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
            "output_units": self.output_units, "memory_dim": self.memory_dim,
            "embedding_dim": self.embedding_dim, "variant": self.variant, **self.attention_config,
            "summary": self.summary, "summary_units": self.summary_units, "dropout": self.dropout,
            "layer_norm": self.layer_norm, "hidden_dropout": self.hidden_dropout,
            "transition_depth": self.transition_depth}
