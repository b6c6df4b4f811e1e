"""Luong et al. 2015 global-attention decoder with input feeding (sec. 3.1, 3.3),
docs/EQUATIONS.md "luong":
  s_t  = RNN([E y_{t-1} ; h~_{t-1}], s_{t-1})   (GRU or LSTM; h~_0 = 0)
  c_t  = ATT(q = s_t)                            (dot, general, concat or additive)
  h~_t = tanh(W_c [c_t ; s_t])
  logits = W_o h~_t + b_o
The E y_{t-1} part of the RNN input projection is precomputed for all steps; only the
input-feeding term W_f h~_{t-1} is projected per step.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops
from nmt_tf.layers.deep_output import Bridge, OutputProjection
from nmt_tf.layers.gru import GRUCell
from nmt_tf.layers.lstm import LSTMCell
from nmt_tf.models.decoder_base import Decoder

RNN_CELLS = ("gru", "lstm")


@keras.saving.register_keras_serializable(package="nmt_tf")
class LuongDecoder(Decoder):
  """Attention after the RNN, attentional state fed back as input.

  Args:
    units: state size d (also the size of h~).
    vocab_size: target vocabulary V.
    memory_dim: annotation size.
    attention, attention_units, attention_mode, hard_inference: the score and its mode.
    rnn_cell: "gru" (reset-after) or "lstm".
    dropout: dropout on h~ before the output projection.
  """

  def __init__(self, units, vocab_size, memory_dim, attention="general", attention_units=None,
               attention_mode="soft", hard_inference="expectation", rnn_cell="gru",
               dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    if rnn_cell not in RNN_CELLS:
      raise ValueError(f"Received rnn_cell={rnn_cell!r}; expected one of {RNN_CELLS}.")
    self.units = units
    self.vocab_size = vocab_size
    self.memory_dim = memory_dim
    self.rnn_cell = rnn_cell
    self.dropout = dropout
    self.attention = self.source_attention(units, memory_dim, attention, attention_units,
                                           attention_mode, hard_inference)
    gates = 3 if rnn_cell == "gru" else 4
    self.rnn = (GRUCell(units, reset_after=True, name="gru") if rnn_cell == "gru"
                else LSTMCell(units, name="lstm"))
    self.feed_proj = keras.layers.Dense(gates * units, use_bias=False, name="W_feed")
    self.combine = keras.layers.Dense(units, activation="tanh", use_bias=False, name="W_c")
    self.bridge = Bridge(units, name="bridge")
    self.output_layer = OutputProjection(vocab_size, dropout, name="output")

  def make_context(self, memory, summary, mask):
    return {"memory": memory, "keys": self.attention.precompute_keys(memory), "mask": mask}

  def initial_state(self, context, max_length):
    s0 = self.bridge(context["memory"], source_mask=context["mask"])  # [batch, units]
    state = {"s": s0, "h_tilde": tf.zeros_like(s0)}
    if self.rnn_cell == "lstm":
      state["c"] = tf.zeros_like(s0)
    return state

  def precompute(self, emb):
    return {"rnn": self.rnn.project_inputs(emb)}  # [..., gates*units]

  def transition(self, x_t, state, context, t, training):
    x_proj = x_t["rnn"] + ops.dense(self.feed_proj, state["h_tilde"])
    new_state = {}
    if self.rnn_cell == "lstm":
      s, new_state["c"] = self.rnn.step(x_proj, (state["s"], state["c"]))
    else:
      s = self.rnn.step(x_proj, state["s"])  # [batch, units]
    c, alpha, log_prob = self.attention(s, context["memory"], context["keys"], context["mask"],
                                        training=training, expect=context.get("expect"))
    h_tilde = ops.dense(self.combine, tf.concat([c, s], axis=-1))  # [batch, units]
    new_state.update(s=s, h_tilde=h_tilde)
    return {"h_tilde": h_tilde, "attention": alpha, "log_prob": log_prob}, new_state

  def output_inputs(self, outputs, emb):
    return outputs["h_tilde"]

  def decision_states(self, outputs, state):
    """h~_{t-1} (h~_0 = 0), which input feeding gives the step t whose state s_t queries
    the attention: [batch, tgt_len, units]."""
    return tf.concat([state["h_tilde"][:, tf.newaxis], outputs["h_tilde"][:, :-1]], axis=1)

  def get_config(self):
    return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
            "memory_dim": self.memory_dim, **self.attention_config, "rnn_cell": self.rnn_cell,
            "dropout": self.dropout}
