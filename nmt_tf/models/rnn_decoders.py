"""The two decoders of the 2014/2015 papers that read the context at the GRU input.

EncDecDecoder (Cho et al. 2014, docs/EQUATIONS.md "encdec"): one fixed context c for all steps,
  s_0 = tanh(W_init c),  s_t = GRU([E y_{t-1} ; c], s_{t-1}),
  logits from the deep output over s_t, E y_{t-1}, c.
RNNSearchDecoder (Bahdanau et al. 2015, A.2.2, docs/EQUATIONS.md "rnnsearch"):
  c_t = ATT(q = s_{t-1}),  s_t = GRU-reset-before over [E y_{t-1} ; c_t] with s_{t-1}:
  s~ = tanh(W E y + U (r (.) s_{t-1}) + C c_t), z and r likewise with C_z c_t, C_r c_t;
  logits from the deep output over s_t, E y_{t-1}, c_t.
W [E y ; c] = W_y E y + C c: W_y E y is precomputed for every step; C c once per sentence for
encdec, per step for rnnsearch (c_t changes).
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops
from nmt_tf.layers.deep_output import Bridge, DeepOutput
from nmt_tf.layers.gru import GRUCell
from nmt_tf.models.decoder_base import Decoder

DEEP_INPUTS = ("state", "prev_embedding", "context")


def _deep_inputs(outputs, emb):
  return {"state": outputs["s"], "prev_embedding": emb, "context": outputs["context"]}


@keras.saving.register_keras_serializable(package="nmt_tf")
class EncDecDecoder(Decoder):
  """Fixed-context GRU decoder (Cho 2014).

  Args:
    units: decoder state size d.
    vocab_size: target vocabulary V.
    output_units: hidden size e of the deep output.
    reset_after: GRU reset placement (Cho 2014: False).
    dropout: deep-output dropout rate.
  """

  def __init__(self, units, vocab_size, output_units, reset_after=False, dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.vocab_size = vocab_size
    self.output_units = output_units
    self.reset_after = bool(reset_after)
    self.dropout = dropout
    self.bridge = Bridge(units, name="bridge")
    self.gru = GRUCell(units, reset_after=reset_after, name="gru")
    self.context_proj = keras.layers.Dense(3 * units, use_bias=False, name="C")
    self.output_layer = DeepOutput(DEEP_INPUTS, output_units, vocab_size, dropout,
                                   name="deep_output")

  def make_context(self, memory, summary, mask):
    return {"summary": summary, "summary_proj": ops.dense(self.context_proj, summary),
            "mask": mask}

  def initial_state(self, context, max_length):
    return {"s": self.bridge(context["summary"])}  # [batch, units]

  def precompute(self, emb):
    return {"gru": self.gru.project_inputs(emb)}  # [..., 3*units]

  def transition(self, x_t, state, context, t, training):
    s = self.gru.step(x_t["gru"] + context["summary_proj"], state["s"])  # [batch, units]
    mask = context["mask"]
    return {
        "s": s,
        "context": context["summary"],
        "attention": tf.zeros(tf.shape(mask), tf.float32),  # no alignment in this model
        "log_prob": tf.zeros(tf.shape(mask)[:1], tf.float32),
    }, {"s": s}

  def output_inputs(self, outputs, emb):
    return _deep_inputs(outputs, emb)

  def get_config(self):
    return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
            "output_units": self.output_units, "reset_after": self.reset_after,
            "dropout": self.dropout}


@keras.saving.register_keras_serializable(package="nmt_tf")
class RNNSearchDecoder(Decoder):
  """Bahdanau et al. 2015 decoder: attention queried with s_{t-1}, context fed to the GRU.

  Args:
    units: decoder state size d.
    vocab_size: target vocabulary V.
    output_units: hidden size e of the deep output.
    memory_dim: annotation size (2 * encoder units for birnn).
    attention: score name ("additive", "dot", "general", "concat").
    attention_units: hidden size of the additive/concat score.
    attention_mode, hard_inference: soft or hard attention (see layers/attention.py).
    reset_after: GRU reset placement (Bahdanau 2015: False).
    dropout: deep-output dropout rate.
  """

  def __init__(self, units, vocab_size, output_units, memory_dim, attention="additive",
               attention_units=None, attention_mode="soft", hard_inference="expectation",
               reset_after=False, dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.vocab_size = vocab_size
    self.output_units = output_units
    self.memory_dim = memory_dim
    self.reset_after = bool(reset_after)
    self.dropout = dropout
    self.attention = self.source_attention(units, memory_dim, attention, attention_units,
                                           attention_mode, hard_inference)
    self.bridge = Bridge(units, name="bridge")
    self.gru = GRUCell(units, reset_after=reset_after, name="gru")
    self.context_proj = keras.layers.Dense(3 * units, use_bias=False, name="C")
    self.output_layer = DeepOutput(DEEP_INPUTS, output_units, vocab_size, dropout,
                                   name="deep_output")

  def make_context(self, memory, summary, mask):
    return {"memory": memory, "keys": self.attention.precompute_keys(memory), "mask": mask}

  def initial_state(self, context, max_length):
    return {"s": self.bridge(context["memory"], source_mask=context["mask"])}  # [batch, units]

  def precompute(self, emb):
    return {"gru": self.gru.project_inputs(emb)}  # [..., 3*units]

  def transition(self, x_t, state, context, t, training):
    s_prev = state["s"]
    c, alpha, log_prob = self.attention(s_prev, context["memory"], context["keys"],
                                        context["mask"], training=training,
                                        expect=context.get("expect"))
    s = self.gru.step(x_t["gru"] + ops.dense(self.context_proj, c), s_prev)  # [batch, units]
    return {"s": s, "context": c, "attention": alpha, "log_prob": log_prob}, {"s": s}

  def output_inputs(self, outputs, emb):
    return _deep_inputs(outputs, emb)

  def get_config(self):
    return {**super().get_config(), "units": self.units, "vocab_size": self.vocab_size,
            "output_units": self.output_units, "memory_dim": self.memory_dim,
            **self.attention_config, "reset_after": self.reset_after, "dropout": self.dropout}
