"""The attention-based encoder-decoder as one subclassed keras.Model.

`call` is teacher-forced; `encode`, `initial_state` and `step` expose the same layers for
incremental decoding (nmt_tf/decoding sees only these callables).
"""

import keras
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.layers import kernels
from nmt_tf.layers import ops
from nmt_tf.layers.embedding import ScaledEmbedding
from nmt_tf.layers.lexical import LexicalModel
from nmt_tf.models.cgru_decoders import CGRUDecoder
from nmt_tf.models.config import ModelConfig
from nmt_tf.models.encoders import ConvEncoder, EmbeddingEncoder, RNNEncoder
from nmt_tf.models.image_encoder import ImageEncoder
from nmt_tf.models.luong_decoder import LuongDecoder
from nmt_tf.models.rnn_decoders import EncDecDecoder, RNNSearchDecoder


def build_encoder(cfg):
  """The encoder layer named by cfg.encoder."""
  if cfg.encoder in ("birnn", "rnn"):
    return RNNEncoder(cfg.encoder_units, cfg.encoder_layers, bidirectional=cfg.encoder == "birnn",
                      reverse_source=cfg.reverse_source, reset_after=cfg.reset_after,
                      layer_norm=cfg.layer_norm, hidden_dropout=cfg.hidden_dropout,
                      name="encoder")
  if cfg.encoder == "conv":
    return ConvEncoder(cfg.encoder_units, cfg.conv_kernel_size, cfg.encoder_layers,
                       name="encoder")
  if cfg.encoder == "image":
    return ImageEncoder(cfg.encoder_units, cfg.encoder_layers, cfg.image_size,
                        backbone=cfg.image_backbone, backbone_weights=cfg.image_backbone_weights,
                        coordinates=cfg.image_coordinates, name="encoder")
  return EmbeddingEncoder(name="encoder")


def build_decoder(cfg):
  """The decoder layer named by cfg.decoder."""
  output_units = cfg.output_units or cfg.embedding_dim
  attention = dict(attention=cfg.attention_score, attention_units=cfg.attention_units,
                   attention_mode=cfg.attention_mode, hard_inference=cfg.hard_inference)
  if cfg.decoder == "encdec":
    return EncDecDecoder(cfg.decoder_units, cfg.tgt_vocab_size, output_units,
                         reset_after=cfg.reset_after, dropout=cfg.dropout, name="decoder")
  if cfg.decoder == "rnnsearch":
    return RNNSearchDecoder(cfg.decoder_units, cfg.tgt_vocab_size, output_units, cfg.memory_dim,
                            reset_after=cfg.reset_after, dropout=cfg.dropout, name="decoder",
                            **attention)
  if cfg.decoder == "luong":
    return LuongDecoder(cfg.decoder_units, cfg.tgt_vocab_size, cfg.memory_dim,
                        rnn_cell=cfg.rnn_cell, dropout=cfg.dropout, name="decoder", **attention)
  variant = cfg.decoder  # the cgru family
  return CGRUDecoder(cfg.decoder_units, cfg.tgt_vocab_size, output_units, cfg.memory_dim,
                     cfg.embedding_dim, variant=variant, summary=cfg.summary,
                     summary_units=cfg.summary_units, dropout=cfg.dropout,
                     layer_norm=cfg.layer_norm, hidden_dropout=cfg.hidden_dropout,
                     transition_depth=cfg.decoder_transition_depth, name="decoder",
                     **attention)


# The `.keras` files of this version: a model whose config lacks it was saved by an earlier
# version, whose files cannot be loaded (`from_config` says so).
SAVED_FORMAT = 1


@keras.saving.register_keras_serializable(package="nmt_tf")
class Seq2Seq(keras.Model):
  """Encoder-decoder NMT model built from a validated ModelConfig.

  Inputs are dicts of int32 ids padded with PAD=0 (docs/DESIGN.md): `source`
  [batch, src_len] (ending in EOS) and `target_in` [batch, tgt_len] (BOS y_1 .. y_{n-1}).

  Args:
    config: a ModelConfig or a dict of its fields.
    kernel_options: kernels.KernelOptions, the speed paths of training (default: the fastest
      measured); attribute `kernel_options`. Resolved with the precision into the
      TrainingLoops of the encoder and of the decoder here, and again when the attribute is
      set, never at call time.
    matmul_dtype: None, or "bfloat16" for the float32_bf16_matmul precision: the operand
      dtype of the matrix products of every forward pass (`ops.forward_pass`).

  Neither option is part of get_config: they change how the model computes, not the model.
  """

  def __init__(self, config, kernel_options=None, matmul_dtype=None, **kwargs):
    super().__init__(**kwargs)
    self._matmul_dtype = matmul_dtype
    self.model_config = config if isinstance(config, ModelConfig) else \
        ModelConfig.from_dict(config)
    cfg = self.model_config
    self.tgt_embedding = self._embedding(cfg.tgt_vocab_size, "tgt_embedding")
    self.src_embedding = self._source_embedding()
    self.embedding_dropout = keras.layers.Dropout(cfg.dropout)
    # Word dropout: one draw per token, shared by its embedding's dimensions. Created only
    # when on, so that the random streams of the checkpoint are those of a model without.
    if cfg.source_word_dropout:
      self.source_word_dropout = keras.layers.Dropout(cfg.source_word_dropout,
                                                      noise_shape=(None, None, 1))
    if cfg.target_word_dropout:
      self.target_word_dropout = keras.layers.Dropout(cfg.target_word_dropout,
                                                      noise_shape=(None, None, 1))
    if cfg.hard_expectation_rate:  # which sentences take the expected context (Xu et al.)
      self.expectation_sampler = keras.random.SeedGenerator(name="expectation_sampler")
    if cfg.embedding_dropout:  # one mask per sentence: the same at every position
      self.variational_dropout = keras.layers.Dropout(cfg.embedding_dropout,
                                                      noise_shape=(None, 1, None))
    self.encoder = build_encoder(cfg)
    self.decoder = build_decoder(cfg)
    if cfg.tie_embeddings != "none":
      self.decoder.output_layer.tie(self.tgt_embedding)
    if cfg.lexical_model:  # its logits are added to the decoder's (Nguyen and Chiang 2018)
      self.lexical = LexicalModel(cfg.tgt_vocab_size, name="lexical")
    self.kernel_options = kernel_options or kernels.DEFAULT_OPTIONS

  def _embedding(self, vocab_size, name):
    """An embedding table of `vocab_size` x e, initialised as `embedding_init_std` says;
    with `scale_embeddings`, stored at 1 / sqrt(e) of that scale (layers/embedding.py)."""
    cfg = self.model_config
    if not cfg.scale_embeddings:  # Keras' own layer
      init = ("uniform" if cfg.embedding_init_std is None else
              keras.initializers.RandomNormal(stddev=float(cfg.embedding_init_std)))
      return keras.layers.Embedding(vocab_size, cfg.embedding_dim,
                                    embeddings_initializer=init, name=name)
    scale = float(cfg.embedding_dim) ** 0.5
    init = (keras.initializers.RandomUniform(-0.05 / scale, 0.05 / scale)
            if cfg.embedding_init_std is None else
            keras.initializers.RandomNormal(stddev=float(cfg.embedding_init_std) / scale))
    return ScaledEmbedding(vocab_size, cfg.embedding_dim, scale=scale,
                           embeddings_initializer=init, name=name)

  def _source_embedding(self):
    """The source embedding table; tie_embeddings="all": the target's (a shared vocabulary)."""
    cfg = self.model_config
    if cfg.tie_embeddings == "all":
      return self.tgt_embedding
    return self._embedding(cfg.src_vocab_size, "src_embedding")

  @property
  def kernel_options(self):
    """kernels.KernelOptions of training; setting it resolves the loops of both parts."""
    return self._kernel_options

  @kernel_options.setter
  def kernel_options(self, options):
    self._kernel_options = options
    self._resolve_kernels()

  @property
  def matmul_dtype(self):
    """The operand dtype of the matrix products (None: the compute dtype); setting it
    resolves the loops of both parts again."""
    return self._matmul_dtype

  @matmul_dtype.setter
  def matmul_dtype(self, dtype):
    self._matmul_dtype = dtype
    self._resolve_kernels()

  def _resolve_kernels(self):
    """Hands the encoder and the decoder the TrainingLoops that the options resolve to with
    this precision (kernels.KernelOptions.resolve), once: no layer decides at call time."""
    loops = kernels.TrainingLoops(self._kernel_options.resolve(self._matmul_dtype,
                                                               self.compute_dtype))
    self.encoder.loops = loops
    self.decoder.loops = loops

  def call(self, inputs, training=False, samples=1, expectation_rate=None):
    """Teacher-forced forward pass.

    Args:
      inputs: dict with `source` and `target_in`.
      training: dropout, sampled hard attention, and the compiled cell.
      samples: N, a Python int: the batch holds N consecutive copies of each sentence, which
        take the expected context together (`hard_expectation_rate`).
      expectation_rate: optional scalar in place of `hard_expectation_rate` (the trainer's
        `reinforce.start`: 1 before it, every sentence takes the expected context).

    Returns:
      dict: logits [batch, tgt_len, tgt_vocab], attention [batch, tgt_len, src_len] (float32),
      attention_log_prob [batch, tgt_len] (hard attention's sampled log alpha, else zeros);
      with hard attention while training, decision_state [batch, tgt_len, units] (the state
      each decision is drawn from, `Decoder.decision_states`) and attention_sampled [batch]
      float32 (1 for the sentences that sampled, 0 for those given the expectation).
    """
    # The compiled cell serves a training pass, as the options resolved.
    with ops.forward_pass(self.matmul_dtype,
                          compiled_cell=training and self.decoder.loops.choice.compiled_cell):
      context = self.encode(inputs["source"], training=training)
      sampler = getattr(self, "expectation_sampler", None)
      rate = self.model_config.hard_expectation_rate if expectation_rate is None else \
          expectation_rate
      rows = tf.shape(inputs["target_in"])[:1]
      if training and sampler is not None:  # [batch] bool, one draw per sentence or batch
        # With `samples` = N consecutive copies of each sentence, the copies share the draw.
        if self.model_config.hard_expectation_draw == "batch":
          draw = tf.broadcast_to(keras.random.uniform([1], seed=sampler), rows)
        else:
          draw = tf.repeat(keras.random.uniform(rows // samples, seed=sampler), samples, axis=0)
        context = {**context, "expect": draw < rate}
      elif training and expectation_rate is not None:  # no draws: all or none
        context = {**context, "expect": tf.fill(rows, tf.convert_to_tensor(rate) >= 1.0)}
      emb = self.embed(inputs["target_in"], "target", training)  # [batch, tgt_len, e]
      decoded = self.decoder(emb, context, training=training)
      logits = self._with_lexical(decoded["logits"], decoded["attention"], context)
    outputs = {"logits": logits, "attention": decoded["attention"],
               "attention_log_prob": decoded["log_prob"]}
    if "decision_state" in decoded:
      outputs["decision_state"] = decoded["decision_state"]
      outputs["attention_sampled"] = (tf.ones_like(decoded["log_prob"][:, 0])
                                      if "expect" not in context else
                                      1.0 - tf.cast(context["expect"], tf.float32))
    return outputs

  def _with_lexical(self, logits, attention, context, vocab=None):
    """The decoder's logits plus the lexical model's, when the model has one."""
    lexical = getattr(self, "lexical", None)
    if lexical is None:
      return logits
    return logits + tf.cast(lexical(attention, context["source_embeddings"], vocab=vocab),
                            logits.dtype)

  def encode(self, source, training=False):
    """source [batch, src_len] ids -> decoding context (dict of batch-leading tensors)."""
    mask = tf.not_equal(source, special_tokens.PAD_ID)  # [batch, src_len]
    with ops.forward_pass(self.matmul_dtype):
      x = self.embed(source, "source", training)  # [batch, src_len, e]
      # [batch, src_len, mem_dim], [batch, mem_dim]
      memory, summary = self.encoder(x, mask, training=training)
      context = self.decoder.make_context(memory, summary, mask)
      if getattr(self, "lexical", None) is not None:
        context["source_embeddings"] = x  # [batch, src_len, e], read by the lexical model
      return context

  def embed(self, ids, side, training=False):
    """ids [batch, len] -> embeddings [batch, len, e] of side "source" or "target", with
    word dropout (whole tokens), dropout (single dimensions) and the embedding dropout (one
    mask per sentence) while training."""
    table = self.src_embedding if side == "source" else self.tgt_embedding
    x = table(ids)
    word_dropout = getattr(self, f"{side}_word_dropout", None)
    if word_dropout is not None:
      x = word_dropout(x, training=training)
    x = self.embedding_dropout(x, training=training)
    variational = getattr(self, "variational_dropout", None)
    return x if variational is None else variational(x, training=training)

  def initial_state(self, context, max_length):
    """Decoder state before the first step, for up to `max_length` steps."""
    with ops.forward_pass(self.matmul_dtype):
      return self.decoder.initial_state(context, max_length)

  def step(self, prev_ids, state, context, time, vocab=None):
    """One incremental decoding step: prev_ids [batch] -> (logits [batch, vocab],
    attention [batch, src_len], new state). With `vocab` (int32 [n], a shortlist of target
    ids) the logits are those of the shortlist's words only, [batch, n]."""
    with ops.forward_pass(self.matmul_dtype):
      logits, attention, state = self.decoder.step(self.tgt_embedding(prev_ids), state,
                                                    context, time, vocab)
      return self._with_lexical(logits, attention, context, vocab), attention, state

  def build_with_dummy_batch(self):
    """Creates every weight by running one tiny batch (needed before `step` or loading).

    `call`, not `__call__`: the layers inside build on first use, and Keras' first
    `__call__` would also trace the whole model symbolically to infer its output shapes
    (0.3-0.7 s of every `translate` start-up on a 2-core CPU)."""
    ids = tf.constant([[4, special_tokens.EOS_ID]], tf.int32)
    self.call({"source": ids, "target_in": tf.constant([[special_tokens.BOS_ID, 4]], tf.int32)})
    self.built = True

  def build_for_decoding(self):
    """Creates the weights that decoding uses by encoding a tiny source and taking one
    decoding step: the kernels the search runs next, where the teacher-forced batch of
    `build_with_dummy_batch` runs the training loops too (0.1-0.15 s more of `nmt-tf
    translate`'s start-up on a 2-core CPU, docs/PERFORMANCE.md). `build_model` checks the
    result against the checkpoint to be restored."""
    source = tf.constant([[4, special_tokens.EOS_ID]], tf.int32)
    context = self.encode(source)
    state = self.initial_state(context, 2)
    self.step(tf.constant([special_tokens.BOS_ID], tf.int32), state, context,
              tf.constant(0, tf.int32))
    self.built = True

  def build(self, inputs_shape=None):
    """Creates every weight. They follow from the config (vocabulary sizes, dimensions), not
    from the inputs' shapes; so Keras builds a model loaded from `.keras` here too."""
    del inputs_shape
    if not self.built:
      self.build_with_dummy_batch()

  def get_build_config(self):
    """A built model is rebuilt by `build` alone (Keras stores this in `.keras` files)."""
    return {"input_shape": None} if self.built else None

  def get_config(self):
    return {"config": self.model_config.to_dict(), "saved_format": SAVED_FORMAT}

  @classmethod
  def from_config(cls, config):
    if config.get("saved_format") != SAVED_FORMAT:
      raise ValueError(
          f"This {cls.__name__} was saved by nmt_tf before 0.1.0 (saved format "
          f"{config.get('saved_format', 0)}, this version reads {SAVED_FORMAT}); its `.keras` "
          "file holds layers that were never built. Save it again from its run: "
          "nmt_tf.load(RUN_DIR).translator.model.save(PATH).")
    return cls(config["config"])
