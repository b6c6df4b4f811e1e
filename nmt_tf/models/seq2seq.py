"""The attention-based encoder-decoder as one subclassed keras.Model.

`call` is teacher-forced; `encode`, `initial_state` and `step` expose the same layers for
incremental decoding (nmt_tf/decoding sees only these callables).
"""

import keras
import tensorflow as tf

from nmt_tf import decoding
from nmt_tf import special_tokens
from nmt_tf.layers import kernels
from nmt_tf.layers import ops
from nmt_tf.layers.embedding import ScaledEmbedding
from nmt_tf.layers.lexical import LexicalModel
from nmt_tf.models import losses
from nmt_tf.models import update
from nmt_tf.models.cgru_decoders import CGRUDecoder
from nmt_tf.models.config import ModelConfig
from nmt_tf.models.encoders import ConvEncoder, EmbeddingEncoder, RNNEncoder
from nmt_tf.models.image_encoder import ImageEncoder
from nmt_tf.models.luong_decoder import LuongDecoder
from nmt_tf.models.objective import CrossEntropy
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

  def compile(self, optimizer="adam", loss=None, objective=None, label_smoothing=0.0,
              clip_norm=1.0, jit_compile=False, metrics=None, **kwargs):
    """Configures `fit` and `evaluate` (keras.Model.compile) with the project's objective.

    Args:
      optimizer: a Keras optimizer or its name.
      objective: what `fit` minimises (nmt_tf/models/objective.py); default the token
        cross-entropy with `label_smoothing`, the objective of `nmt-tf train` (hard attention's
        REINFORCE objective trains with `nmt-tf train`).
      label_smoothing: epsilon of the default objective.
      clip_norm: the gradients' global norm is clipped to it (0: no clipping).
      jit_compile: XLA-compile the step; off by default (the compiled GRU cell is not an XLA
        op).
      loss, metrics: None (the objective is the loss; `fit` and `evaluate` report the loss
        and the perplexity).
      **kwargs: the other arguments of keras.Model.compile.

    The loss of `fit` and `evaluate` is the mean token loss over the real (non-PAD) target
    tokens; they also report its exponential, `perplexity`.
    """
    if loss is not None or metrics:
      given = f"loss={loss!r}" if loss is not None else f"metrics={metrics!r}"
      raise ValueError(f"{type(self).__name__}.compile received {given}; the model's "
                       "objective is its loss (token cross-entropy, label_smoothing), and fit "
                       "reports it with its perplexity; pass objective= instead.")
    objective = objective or CrossEntropy(label_smoothing)
    if objective.samples != 1 or objective.head_variables or objective.diagnoses:
      raise ValueError(f"{type(self).__name__}.compile received {type(objective).__name__}, "
                       "an objective with samples, a head or terms (hard attention); train "
                       "it with nmt-tf train.")
    if not self.built:  # the weights, here: in the strategy's scope where compile is called
      self.build_with_dummy_batch()
    super().compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)
    self.objective = objective
    self.clip_norm = clip_norm

  def get_compile_config(self):
    """Keras' compile arguments with the default objective's label smoothing and the
    clipping, so that a `.keras` file loads compiled as it was saved."""
    config = super().get_compile_config()  # {} before compile
    if config and type(self.objective) is CrossEntropy:  # pylint: disable=unidiomatic-typecheck
      config.update(label_smoothing=self.objective.label_smoothing, clip_norm=self.clip_norm)
    return config

  def compile_from_config(self, config):
    """What keras.Model.compile_from_config does, through this class's own `compile`."""
    if not config:
      return
    self.compile(**keras.saving.deserialize_keras_object(config))
    if getattr(self, "optimizer", None) is not None and self.built:
      self.optimizer.build(self.trainable_variables)  # its variables, which the file holds

  def _maybe_symbolic_build(self, iterator=None, data_batch=None):
    """Keras' fit builds a model under a strategy from its first batch averaged over the
    replicas, which fails when they hold different numbers of sentences (3 over 2 devices,
    as an epoch's last batch often is); this model's weights are made by `compile` (the
    layers that only decoding uses build at its first step), its loss and metrics need no
    building, so the optimizer's variables are all that is left to make."""
    if self._distribute_strategy is None or not self.built:
      super()._maybe_symbolic_build(iterator, data_batch)
      return
    with self.distribute_strategy.scope():
      if self.optimizer is not None and not self.optimizer.built:
        self.optimizer.build(self.trainable_variables)
      self._post_build()

  @staticmethod
  def training_batch(data):
    """{"source", "target_in", "target_out"} of what `fit` and `evaluate` iterate: the
    project's batches (that dict), or Keras' `(x, y)` with x {"source", "target_in"} and y
    the target_out ids."""
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    if sample_weight is not None:
      raise ValueError("Seq2Seq.fit received sample weights; every real target token weighs "
                       "the same (PAD tokens, id 0, weigh nothing).")
    keys = ("source", "target_in") if y is not None else ("source", "target_in", "target_out")
    missing = [key for key in keys if not isinstance(x, dict) or key not in x]
    if missing:
      raise ValueError("Seq2Seq.fit expects batches {'source', 'target_in', 'target_out'} or "
                       f"({{'source', 'target_in'}}, target_out); received "
                       f"{type(x).__name__} {'x ' if y is not None else ''}without "
                       f"{', '.join(missing)}.")
    if y is None:
      return x
    return {"source": x["source"], "target_in": x["target_in"], "target_out": y}

  def train_step(self, data):
    """One update of `fit` (per replica): `update.replica_update`, the step of `nmt-tf train`."""
    out = update.replica_update(self, self.optimizer, self.objective, self.training_batch(data),
                                self.objective.step_inputs(), self.clip_norm)
    return self._logs(out["loss_sum"], out["tokens"])

  def test_step(self, data):
    """The token loss of one batch of `evaluate`, without label smoothing."""
    batch = self.training_batch(data)
    outputs = self({"source": batch["source"], "target_in": batch["target_in"]},
                   training=False)
    loss_sum, tokens = losses.token_loss_sum(outputs["logits"], batch["target_out"])
    return self._logs(loss_sum, tokens)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """The objective's loss of a batch: its summed token loss over its real target tokens."""
    del sample_weight, training
    batch = {"source": x["source"], "target_in": x["target_in"], "target_out": y}
    tokens = tf.reduce_sum(tf.cast(y != special_tokens.PAD_ID, tf.float32))
    sentences = tf.cast(tf.shape(y)[0], tf.float32)
    return self.objective.loss(y_pred, batch, tf.maximum(tokens, 1.0), sentences, ()).total

  def _logs(self, loss_sum, tokens):
    """{"loss", "perplexity"} over the batches so far: Keras' loss tracker (the Mean that
    `compile` makes, reset by `fit` and `evaluate`) weighs each batch by its tokens."""
    tracker = self._loss_tracker  # pylint: disable=protected-access
    tracker.update_state(loss_sum / tf.maximum(tokens, 1.0), sample_weight=tokens)
    mean = tracker.result()
    return {"loss": mean, "perplexity": tf.exp(mean)}

  def generate(self, source, beam_size=1, nbest=1, max_length=100, length_penalty=0.0,
               coverage_penalty=0.0, min_length=0, max_length_a=None, max_length_b=0.0):
    """Translations of source ids by the search that `nmt-tf translate` and the exports run
    (`decoding.decode_model`): greedy with beam_size=1, else beam search (KerasHub's name).

    Args:
      source: int32 [batch, src_len] ids ending in EOS, PAD (0) after (a tensor, a numpy
        array or nested lists).
      beam_size, nbest: the beam's width and how many hypotheses to return (<= beam_size).
      max_length: a python int, the most tokens of a translation, EOS included.
      length_penalty, coverage_penalty: GNMT alpha and beta (beam search).
      min_length, max_length_a, max_length_b: at least `min_length` tokens before EOS, and
        at most `max_length_a * source length + max_length_b` (None: max_length only).

    Returns:
      {"ids": int32 [batch, nbest, max_length] (EOS included, PAD after), "lengths": int32
      [batch, nbest], "log_probs" and "scores" (after the penalties): float32 [batch,
      nbest], "attention": float32 [batch, nbest, max_length, src_len],
      "token_log_probs": float32 [batch, nbest, max_length]}, hypotheses best first.
      Eager, or inside a tf.function (which traces once per set of arguments).
    """
    source = tf.convert_to_tensor(source, tf.int32)  # [batch, src_len]
    if not self.built:
      self.build_for_decoding()
    with kernels.precision_scope(self.matmul_dtype, prefetch=self.trainable_variables):
      result = decoding.decode_model(
          self, source, max_length=max_length, beam_size=beam_size, nbest=nbest,
          length_penalty=length_penalty, coverage_penalty=coverage_penalty,
          min_length=min_length, max_length_a=max_length_a, max_length_b=max_length_b)
    return result._asdict()

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
