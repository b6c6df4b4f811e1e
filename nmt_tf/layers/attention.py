"""Attention over encoder annotations: Bahdanau (additive) and Luong (dot, general, concat)
scores, each usable soft or hard (sampled).

docs/EQUATIONS.md, "Attention scores": alpha = softmax over real source positions of e_i,
c = sum_i alpha_i h_i, with
  additive (Bahdanau 2015, sec. 3.1 / A.1.2): e_i = v^T tanh(W_a q + U_a h_i)
  dot (Luong 2015, sec. 3.1):                 e_i = q^T h_i
  general:                                    e_i = q^T W_a h_i
  concat:                                     e_i = v^T tanh(W_a [q ; h_i])
  hard (Xu et al. 2015, sec. 4.1): i ~ Categorical(alpha), c = h_i; at inference the
  expectation (= soft c) or the argmax position.
The key side (U_a h_i, W_a h_i) depends only on the sentence: `precompute_keys(memory)` is
called once per batch, and each step only projects the query. Called as Keras' attention
layers are, `layer(query, value, mask=...)`, a layer computes the keys itself.
"""

import keras
import tensorflow as tf

from nmt_tf.layers import ops

MODES = ("soft", "hard")
HARD_INFERENCE = ("expectation", "argmax")


class _Attention(keras.layers.Layer):
  """Shared soft/hard logic; subclasses define `precompute_keys` and `score`.

  Args:
    mode: "soft" or "hard".
    hard_inference: for mode="hard" outside training, "expectation" or "argmax".
  """

  def __init__(self, mode="soft", hard_inference="expectation", **kwargs):
    super().__init__(**kwargs)
    if mode not in MODES:
      raise ValueError(f"Received mode={mode!r}; expected one of {MODES}.")
    if hard_inference not in HARD_INFERENCE:
      raise ValueError(
          f"Received hard_inference={hard_inference!r}; expected one of {HARD_INFERENCE}.")
    self.mode = mode
    self.hard_inference = hard_inference
    # `mask` names the value's real positions: the outputs carry no mask of it (compute_mask).
    self.supports_masking = True
    if mode == "hard":
      # Positions are drawn from a Keras SeedGenerator: seeded by keras.utils.set_random_seed,
      # and its state is checkpointed by the trainer, so a resumed run draws the same positions.
      self.seed_generator = keras.random.SeedGenerator(name="position_sampler")

  def compute_mask(self, inputs, previous_mask=None):
    """The outputs' mask: the query's, where Keras' [query_mask, value_mask] is given."""
    del inputs
    if isinstance(previous_mask, (list, tuple)) and len(previous_mask) == 2:
      return previous_mask[0]
    return None

  def precompute_keys(self, memory):
    """Step-independent key projections: memory [batch, src_len, mem_dim] -> keys."""
    raise NotImplementedError

  def score(self, query, keys):
    """Scores e [batch, src_len] of query [batch, q_dim] against precomputed keys."""
    raise NotImplementedError

  def call(self, query, value, keys=None, mask=None, training=False, expect=None):
    """Attends over `value` with each query: `layer(query, value, mask=...)`, the call form
    of Keras' attention layers.

    Args:
      query: [batch, q_dim], the decoder-side query q; or a sequence of queries
        [batch, t_q, q_dim], each attending alone (the outputs get the t_q axis).
      value: [batch, src_len, mem_dim], the annotations h.
      keys: optional `precompute_keys(value)`, which a decoder computes once per sentence and
        passes at every step; computed here when None.
      mask: optional [batch, src_len] bool, True at real source positions, or Keras'
        [query_mask, value_mask] (its value mask is used); None: every position is real.
      training: in hard mode, sample positions when True.
      expect: optional [batch] bool, hard mode while training: rows that take the expected
        context sum_i alpha_i h_i instead of a sample, with log_prob 0 (Xu et al. 2015,
        sec. 4.1: for half of the images).

    Returns:
      context [batch, mem_dim], weights alpha [batch, src_len] float32, and log_prob [batch]
      float32: log alpha of the sampled position (hard mode while training), else zeros
      (each with a t_q axis after the batch for a sequence of queries).
    """
    mask = _value_mask(mask, value, self.name)
    if keys is None:
      keys = self.precompute_keys(value)
    if query.shape.rank == 3:  # [batch, t_q, q_dim]: rows of batch * t_q single queries
      t_q = tf.shape(query)[1]
      rows = lambda x: None if x is None else tf.repeat(x, t_q, axis=0)  # pylint: disable=unnecessary-lambda-assignment
      outputs = self.attend(tf.reshape(query, [-1, query.shape[-1]]), rows(value), rows(keys),
                            rows(mask), training, rows(expect))
      return tuple(tf.reshape(x, tf.concat([[-1, t_q], tf.shape(x)[1:]], 0)) for x in outputs)
    return self.attend(query, value, keys, mask, training, expect)

  def attend(self, query, memory, keys, mask, training=False, expect=None):
    """The equations for one query per row (`call`'s arguments, keys and mask given):
    e = score(q, keys), alpha = softmax of e over real positions, c = sum_i alpha_i h_i
    (hard: h_i of a sampled i)."""
    scores = self.score(query, keys)  # e [batch, src_len]
    weights = ops.masked_softmax(scores, mask)  # alpha [batch, src_len]
    log_prob = tf.zeros_like(weights[:, 0])  # [batch]
    if self.mode == "hard" and (training or self.hard_inference == "argmax"):
      if training:
        # Padded positions get -inf: they are never sampled.
        logits = tf.where(tf.cast(mask, tf.bool), tf.math.log(tf.maximum(weights, 1e-30)),
                          -float("inf"))
        index = keras.random.categorical(logits, 1, dtype="int32",
                                         seed=self.seed_generator)[:, 0]  # [batch]
      else:
        index = tf.argmax(weights, axis=-1, output_type=tf.int32)  # [batch]
      picked = tf.one_hot(index, tf.shape(weights)[1], dtype=tf.float32)  # [batch, src_len]
      if training:
        log_prob = tf.math.log(tf.maximum(tf.reduce_sum(picked * weights, -1), 1e-30))
      select = picked
      if training and expect is not None:
        select = tf.where(expect[:, tf.newaxis], weights, picked)  # [batch, src_len]
        log_prob = tf.where(expect, tf.zeros_like(log_prob), log_prob)  # [batch]
    else:
      select = weights
    context = ops.attend(tf.cast(select, memory.dtype), memory)  # c [batch, mem_dim]
    return context, weights, log_prob

  def get_config(self):
    return {**super().get_config(), "mode": self.mode, "hard_inference": self.hard_inference}


def _value_mask(mask, value, name):
  """The mask [batch, src_len] of `value` [batch, src_len, mem_dim] from `call`'s mask (all
  positions when None); a ValueError naming both shapes when it is not of that shape."""
  if isinstance(mask, (list, tuple)):  # Keras' [query_mask, value_mask]
    if len(mask) != 2:
      raise ValueError(f"Attention layer '{name}' received a list of {len(mask)} masks; "
                       "expected [query_mask, value_mask] or the value's mask alone.")
    mask = mask[1]
  if mask is None:
    return tf.ones(tf.shape(value)[:2], tf.bool)  # [batch, src_len]
  mask = tf.cast(mask, tf.bool)  # Keras' masks are bool; 0/1 masks are taken too
  if mask.shape.rank != 2 or not mask.shape.is_compatible_with(value.shape[:2]):
    raise ValueError(f"Attention layer '{name}' received a mask of shape {tuple(mask.shape)} "
                     f"for a value of shape {tuple(value.shape)}; the mask is [batch, "
                     "src_len], True at the value's real positions.")
  return mask


def _check_units(units):
  if not isinstance(units, int) or units <= 0:
    raise ValueError(f"Received units={units!r}; expected a positive integer.")


@keras.saving.register_keras_serializable(package="nmt_tf")
class BahdanauAttention(_Attention):
  """Additive attention e_i = v^T tanh(W_a q + U_a h_i) (Bahdanau et al. 2015, A.1.2).

  Args:
    units: positive int, the size of the hidden layer of the score MLP.
    mode, hard_inference: see `_Attention`.
  """

  def __init__(self, units, **kwargs):
    super().__init__(**kwargs)
    _check_units(units)
    self.units = units
    self.query_dense = keras.layers.Dense(units, use_bias=False, name="W_a")
    self.key_dense = keras.layers.Dense(units, use_bias=True, name="U_a")

  def build(self, query_shape=None, value_shape=None, keys_shape=None):
    """W_a from the query's shape [..., q_dim], U_a from the value's [..., mem_dim] (a shape
    left out builds its projection at its first use), and v."""
    del keys_shape
    _build_dense(self.query_dense, query_shape)
    _build_dense(self.key_dense, value_shape)
    self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")
    self.built = True

  def precompute_keys(self, memory):
    if not self.built:
      self.build()
    return ops.dense(self.key_dense, memory)  # [batch, src_len, units]

  def score(self, query, keys):
    query = ops.dense(self.query_dense, query)  # W_a q [batch, units]
    return ops.additive_score(keys, query, self.v)  # [batch, src_len]

  def get_config(self):
    return {**super().get_config(), "units": self.units}


def _build_dense(layer, input_shape):
  if input_shape is not None and not layer.built:
    layer.build(input_shape)


LUONG_SCORES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="nmt_tf")
class LuongAttention(_Attention):
  """Luong et al. 2015 (sec. 3.1) scores: dot q^T h_i, general q^T W_a h_i,
  concat v^T tanh(W_a [q ; h_i]).

  Args:
    score: "dot", "general" or "concat". dot needs q_dim == mem_dim.
    units: for concat, the hidden size of the MLP; for general, the query size q_dim (W_a maps
      h_i to it; None: taken from the query's shape when the layer builds); ignored for dot.
    mode, hard_inference: see `_Attention`.
  """

  def __init__(self, score="general", units=None, **kwargs):
    super().__init__(**kwargs)
    if score not in LUONG_SCORES:
      raise ValueError(f"Received score={score!r}; expected one of {LUONG_SCORES}.")
    if score == "concat" or (score == "general" and units is not None):
      _check_units(units)
    self.score_type = score
    self.units = units
    if score == "concat":
      # W_a [q ; h] = W_q q + W_h h: the two halves of W_a, kept as separate kernels.
      self.query_dense = keras.layers.Dense(units, use_bias=False, name="W_a_query")
      self.key_dense = keras.layers.Dense(units, use_bias=True, name="W_a_memory")
    elif score == "general" and units is not None:
      self.key_dense = keras.layers.Dense(units, use_bias=False, name="W_a")

  def build(self, query_shape=None, value_shape=None, keys_shape=None):
    """The projections from the shapes of the query [..., q_dim] and the value
    [..., mem_dim] (a shape left out builds its projection at its first use), and v."""
    del keys_shape
    if self.score_type == "general" and self.units is None and not hasattr(self, "key_dense"):
      if query_shape is None:
        raise ValueError("LuongAttention(score='general', units=None) takes q_dim from the "
                         "query's shape; call it with the query, or pass units=q_dim.")
      self.key_dense = keras.layers.Dense(query_shape[-1], use_bias=False, name="W_a")
    if self.score_type == "concat":
      _build_dense(self.query_dense, query_shape)
      self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")
    if self.score_type != "dot":
      _build_dense(self.key_dense, value_shape)
    self.built = True

  def precompute_keys(self, memory):
    if not self.built:
      self.build()
    if self.score_type == "dot":
      return memory  # [batch, src_len, mem_dim]
    # general: W_a h_i [batch, src_len, q_dim]; concat: W_h h_i + b [batch, src_len, units]
    return ops.dense(self.key_dense, memory)

  def score(self, query, keys):
    if self.score_type == "concat":
      query = ops.dense(self.query_dense, query)  # W_q q [batch, units]
      return ops.additive_score(keys, query, self.v)  # [batch, src_len]
    if query.shape[-1] != keys.shape[-1]:
      raise ValueError(
          f"Luong score={self.score_type!r} received a query of size {query.shape[-1]} and keys "
          f"of size {keys.shape[-1]}; they must match (use score='general' or 'concat').")
    return ops.score(keys, query)  # [batch, src_len]

  def get_config(self):
    return {**super().get_config(), "score": self.score_type, "units": self.units}


def make_attention(score, units, query_dim, memory_dim, mode="soft",
                   hard_inference="expectation", name="attention"):
  """Builds the attention layer named by `score` ("additive"/"mlp", "dot", "general", "concat")."""
  if score in ("additive", "mlp"):
    return BahdanauAttention(units, mode=mode, hard_inference=hard_inference, name=name)
  if score not in LUONG_SCORES:
    raise ValueError(f"Received attention score={score!r}; expected 'additive' or one of "
                     f"{LUONG_SCORES}.")
  if score == "dot" and query_dim != memory_dim:
    raise ValueError(
        f"score='dot' needs the decoder query size ({query_dim}) to equal the annotation size "
        f"({memory_dim}); set encoder units so that they match or use score='general'.")
  units = {"dot": None, "general": query_dim, "concat": units}[score]
  return LuongAttention(score, units=units, mode=mode, hard_inference=hard_inference, name=name)
