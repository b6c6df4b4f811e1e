"""Self-attention over the decoder's own past (Werlen et al. 2018, appendix A.3),
docs/EQUATIONS.md "Self-attentive residual decoder".

SelfAttentiveResidual (A.3.1): d_t summarises the embeddings of the previous target words
y_1 .. y_{t-1}; BOS is not a target word, so at t = 1 the set is empty and d_1 = 0:
  avg:  d_t = 1/(t-1) sum_{i=1}^{t-1} E y_i
  cavg: d_t = sum_{i=1}^{t-1} a_i E y_i,  a = softmax_i(v^T tanh(W_y E y_i))
avg is cavg with all scores 0, so both share one code path. Teacher-forced, a causal mask over
[tgt_len, tgt_len] gives every d_t at once; while decoding, `step` keeps a running max, numerator
and denominator (an online softmax) so each step costs O(1) in t.

StateMemory (A.3.2, memory RNN): over previous decoder states s_0 .. s_{t-1},
  e_i = v^T tanh(W_m s_i + W_s s_{t-1}),  s~_t = sum_i softmax(e)_i s_i
read by the recurrence instead of s_{t-1}. The paper prints s_t in the score, which is circular
here (s~_t makes s_t), so the query is s_{t-1}, and s_0 is the only memory at t = 1. W_m s_i is
computed once when s_i is written to the buffer, not at every later step.

StateAttention (A.3.3, self-attentive RNN): over the previous outputs of the recurrence
s_1 .. s_{t-1}, queried with the current state s_t (known when the output layer needs s~_t,
since here s~_t does not feed the recurrence):
  e_i = v^T tanh(W_m s_i + W_s s_t),  s~_t = sum_{i=1}^{t-1} softmax(e)_i s_i,  s~_1 = 0.
Teacher-forced, a strictly causal mask gives every s~_t at once from the states of the cGRU
loop; while decoding, `step` attends over a buffer of the states written so far.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops

SUMMARIES = ("avg", "cavg")


@keras.saving.register_keras_serializable(package="nmt_tf")
class SelfAttentiveResidual(keras.layers.Layer):
  """The summary d_t of previous target embeddings (avg or cavg).

  Args:
    summary: "avg" or "cavg".
    units: hidden size of the cavg score MLP (ignored for avg).
  """

  def __init__(self, summary="avg", units=None, **kwargs):
    super().__init__(**kwargs)
    if summary not in SUMMARIES:
      raise ValueError(f"Received summary={summary!r}; expected one of {SUMMARIES}.")
    if summary == "cavg" and (not isinstance(units, int) or units <= 0):
      raise ValueError(f"Received units={units!r} with summary='cavg'; expected a positive "
                       "integer.")
    self.summary = summary
    self.units = units
    if summary == "cavg":
      self.score_dense = keras.layers.Dense(units, activation="tanh", name="W_y")

  def build(self, *args, **kwargs):
    if self.summary == "cavg":
      self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")
    self.built = True

  def scores(self, emb):
    """Per-position scores e_i [...] of embeddings [..., emb_dim] (zeros for avg), float32."""
    if self.summary == "avg":
      return tf.zeros(tf.shape(emb)[:-1], tf.float32)
    if not self.built:
      self.build()
    hidden = ops.dense(self.score_dense, emb)  # [..., units]
    return tf.cast(tf.reduce_sum(hidden * tf.cast(self.v, hidden.dtype), -1), tf.float32)

  def call(self, emb, scores=None):
    """Teacher-forced: emb [batch, tgt_len, e], rows E y_0 (BOS), E y_1 .. E y_{n-1} ->
    d [batch, tgt_len, e], row t summarising rows 1..t (row 0: zeros). `scores`
    [batch, tgt_len] may be passed when precomputed with `scores`."""
    n = tf.shape(emb)[1]
    position = tf.range(n)
    # [tgt_len, tgt_len]: row t reads rows 1..t (y_1..y_t; BOS at row 0 never)
    mask = (position[None, :] <= position[:, None]) & (position[None, :] >= 1)
    scores = (self.scores(emb) if scores is None else scores)[:, None, :]  # [batch, 1, tgt_len]
    weights = ops.masked_softmax(scores, mask[None])  # [batch, tgt_len, tgt_len]
    weights *= tf.cast(mask, weights.dtype)[None]  # row 0 reads nothing: d_1 = 0
    return tf.matmul(tf.cast(weights, emb.dtype), emb)  # [batch, tgt_len, e]

  def initial_state(self, batch_size, dim, dtype=tf.float32):
    """Online-softmax state before any embedding: max, numerator, denominator."""
    return {
        "max": tf.fill([batch_size, 1], tf.constant(ops.NEG_INF, tf.float32)),
        "num": tf.zeros([batch_size, dim], tf.float32),
        "den": tf.zeros([batch_size, 1], tf.float32),
    }

  def step(self, emb_t, state, time, score=None):
    """Adds E y_t [batch, e] (the input of step `time`, 0-based; BOS at time 0 is not added)
    to the running summary; returns (d [batch, e], new state). d is 0 at time 0.

    `score` [batch] may be passed when precomputed with `scores` for all positions.
    """
    score = (self.scores(emb_t) if score is None else score)[:, None]  # [batch, 1]
    include = time > 0
    score = tf.where(include, score, ops.NEG_INF)  # BOS leaves the running max alone
    new_max = tf.maximum(state["max"], score)
    decay = tf.exp(state["max"] - new_max)  # [batch, 1]
    weight = tf.exp(score - new_max) * tf.cast(include, tf.float32)  # [batch, 1]
    num = state["num"] * decay + weight * tf.cast(emb_t, tf.float32)  # [batch, e]
    den = state["den"] * decay + weight
    d = tf.cast(tf.math.divide_no_nan(num, den), emb_t.dtype)  # [batch, e]
    return d, {"max": new_max, "num": num, "den": den}

  def get_config(self):
    return {**super().get_config(), "summary": self.summary, "units": self.units}


class PastStates(keras.layers.Layer):
  """What the memory RNN and the self-attentive RNN share: the score
  e_i = v^T tanh(W_m s_i + b_m + W_s q) over decoder states s_i for a query state q, and
  buffers of the states and their keys W_m s_i + b_m, each computed once, when written.

  Args:
    units: hidden size of the score MLP.
  """

  def __init__(self, units, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(units, int) or units <= 0:
      raise ValueError(f"Received units={units!r}; expected a positive integer.")
    self.units = units
    self.key_dense = keras.layers.Dense(units, use_bias=True, name="W_m")
    self.query_dense = keras.layers.Dense(units, use_bias=False, name="W_s")

  def build(self, *args, **kwargs):
    self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")
    self.built = True

  def empty_buffers(self, s0, size):
    """Zero buffers of `size` states and keys; s0 [batch, d] gives batch, d and dtype."""
    if not self.built:
      self.build()
    batch = tf.shape(s0)[0]
    return {"states": tf.zeros([batch, size, s0.shape[-1]], s0.dtype),  # [batch, L, d]
            "keys": tf.zeros([batch, size, self.units], s0.dtype)}  # [batch, L, units]

  def write(self, memory, s, index):
    """Writes s_index [batch, d] (and its key W_m s + b_m) into the buffers at `index`."""
    size = tf.shape(memory["states"])[1]
    at = tf.one_hot(index, size, on_value=True, off_value=False)[None, :, None]  # [1, L, 1]
    key = ops.dense(self.key_dense, s)  # [batch, units]
    return {
        "states": tf.where(at, s[:, None, :], memory["states"]),  # [batch, L, d]
        "keys": tf.where(at, tf.cast(key, memory["keys"].dtype)[:, None, :], memory["keys"]),
    }

  def get_config(self):
    return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="nmt_tf")
class StateMemory(PastStates):
  """Attention over previous decoder states s_0..s_{t-1}, queried with s_{t-1} (the memory
  RNN, appendix A.3.2).

  The memory is a buffer [batch, max_len + 1, d] (states) and one of keys W_m s_i
  [batch, max_len + 1, units], written at index i when s_i is produced.

  Args:
    units: hidden size of the score MLP.
  """

  def build(self, s_prev_shape=None, memory_shape=None, time_shape=None):
    """v, and W_s and W_m from the shapes of Keras' call form (s_prev [batch, d], memory
    {"states": [batch, L, d], "keys"}); without them (the decoder) they build at first use."""
    del time_shape
    if s_prev_shape is not None and memory_shape is not None:
      for layer, shape in ((self.query_dense, s_prev_shape),
                           (self.key_dense, memory_shape["states"])):
        if not layer.built:
          layer.build(shape)
    super().build()

  def initial_state(self, s0, max_len):
    """Buffers holding s_0 at index 0: s0 [batch, d] -> dict of [batch, max_len + 1, ...]."""
    return self.write(self.empty_buffers(s0, max_len + 1), s0, 0)

  def call(self, s_prev, memory, time, training=False):
    """s~_t over entries 0..time: s_prev [batch, d] -> (s~ [batch, d], weights [batch, L])."""
    query = ops.dense(self.query_dense, s_prev)  # W_s s_{t-1} [batch, units]
    keys = memory["keys"]  # [batch, L, units]
    scores = ops.additive_score(keys, query, self.v)  # [batch, L]
    valid = tf.range(tf.shape(scores)[1]) <= time  # [L]
    weights = ops.masked_softmax(scores, valid[None, :])  # [batch, L]
    summary = tf.matmul(tf.cast(weights, s_prev.dtype)[:, None, :], memory["states"])[:, 0]
    return summary, weights


@keras.saving.register_keras_serializable(package="nmt_tf")
class StateAttention(PastStates):
  """s~_t: attention over the previous states s_1..s_{t-1}, queried with s_t (appendix A.3.3).

  While decoding, the states are kept in a buffer [batch, max_len, d] and their keys W_m s_i
  in one of [batch, max_len, units]; step t (0-based, producing s_{t+1}) reads entries
  0..t-1 and then writes its own state at entry t.

  Args:
    units: hidden size of the score MLP.
  """

  def _scores(self, keys, query):
    """v^T tanh(keys + query): keys [batch, ..., n, units], query [batch, ..., units] ->
    [batch, ..., n] (plain ops: decoding, or all steps at once without a time loop)."""
    if not self.built:
      self.build()
    return ops.additive_score(keys, query, self.v)  # [batch, ..., n]

  def call(self, states):
    """Teacher-forced: states [batch, tgt_len, d] (s_1..s_n) -> s~ [batch, tgt_len, d], row t
    attending over rows 0..t-1 (row 0: zeros)."""
    keys = ops.dense(self.key_dense, states)  # W_m s_i + b [batch, tgt_len, units]
    query = ops.dense(self.query_dense, states)  # W_s s_t [batch, tgt_len, units]
    scores = self._scores(keys[:, None, :, :], query)  # [batch, tgt_len (t), tgt_len (i)]
    n = tf.shape(states)[1]
    earlier = tf.linalg.band_part(tf.ones([n, n], tf.bool), -1, 0) & ~tf.eye(n, dtype=tf.bool)
    weights = ops.masked_softmax(scores, earlier[None])  # [batch, tgt_len, tgt_len]
    weights *= tf.cast(earlier, weights.dtype)[None]  # row 0 attends to nothing: s~_1 = 0
    return tf.matmul(tf.cast(weights, states.dtype), states)  # [batch, tgt_len, d]

  def initial_state(self, s0, max_len):
    """Empty buffers for `max_len` states: s0 [batch, d] -> dict of [batch, max_len, ...]."""
    return self.empty_buffers(s0, max_len)

  def step(self, s, memory, time):
    """s~ for the state s [batch, d] of step `time` (0-based) over entries 0..time-1, then
    writes s at entry `time`. Returns (s~ [batch, d], new memory)."""
    query = ops.dense(self.query_dense, s)  # [batch, units]
    scores = self._scores(memory["keys"], tf.cast(query, memory["keys"].dtype))  # [batch, L]
    earlier = tf.range(tf.shape(scores)[1]) < time  # [L]
    weights = ops.masked_softmax(scores, earlier[None, :])
    weights *= tf.cast(earlier, weights.dtype)[None, :]  # [batch, L]; zeros at time 0
    summary = tf.matmul(tf.cast(weights, s.dtype)[:, None, :], memory["states"])[:, 0]
    return summary, self.write(memory, s, time)
