"""The validated model configuration: one frozen dataclass, checked once at the entry.

Every model of the papers is a value of `decoder` (with the encoder and attention options):
  encdec (Cho 2014), rnnsearch (Bahdanau 2015), cgru (dl4mt/Nematus), luong (Luong 2015),
  self_attentive_residual, memory_rnn, self_attentive_rnn (Werlen et al. 2018).
Unknown keys and invalid values raise ConfigError naming the key, the value and the fix.
"""

import dataclasses
from typing import Optional

ENCODERS = ("birnn", "rnn", "embedding", "conv", "image")
DECODERS = ("encdec", "rnnsearch", "cgru", "luong", "self_attentive_residual", "memory_rnn",
            "self_attentive_rnn")
ATTENTIONS = ("additive", "dot", "general", "concat")
ATTENTION_MODES = ("soft", "hard")
HARD_INFERENCE = ("expectation", "argmax")
HARD_EXPECTATION_DRAWS = ("sentence", "batch")
GRU_RESETS = ("before", "after")
RNN_CELLS = ("gru", "lstm")
SUMMARIES = ("avg", "cavg")
TIE_EMBEDDINGS = ("none", "target", "all")
# Paper defaults for the GRU reset placement (docs/EQUATIONS.md "GRU conventions").
DEFAULT_RESET = {"encdec": "before", "rnnsearch": "before"}


class ConfigError(ValueError):
  """An invalid model configuration value."""


def _is_number(value):
  """An int or float config value (a bool is neither here)."""
  return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Model hyperparameters (see docs/MODELS.md for each decoder's equations).

  Attributes:
    src_vocab_size, tgt_vocab_size: vocabulary sizes, including the 4 special tokens.
    embedding_dim: e, source and target embedding size.
    encoder: birnn | rnn | embedding | conv | image (caption generation: the source is an
      image, its annotation vectors those of models/image_encoder.py; Xu et al. 2015).
    encoder_units: GRU size per direction (rnn encoders), conv channels, or the size of the
      image annotation vectors.
    encoder_layers: stacked encoder layers (image: convolution blocks of the convnet).
    reverse_source: read the source backwards (rnn encoder only; Sutskever 2014).
    conv_kernel_size: odd width of the conv encoder.
    decoder: one of DECODERS.
    decoder_units: d, the decoder state size.
    output_units: hidden size of the deep output (default: embedding_dim).
    attention: additive | dot | general | concat; None = the paper's (general for luong,
      additive otherwise). `attention_score` gives the one in effect.
    attention_units: hidden size of additive/concat scores (default: decoder_units).
    attention_mode: soft | hard (Xu et al. 2015; trained with REINFORCE).
    hard_inference: expectation | argmax, hard attention at inference.
    hard_expectation_rate: hard attention while training: the share of sentences (drawn per
      sentence and batch) whose every step takes the expected context sum_i alpha_i h_i
      instead of a sample and adds no REINFORCE term (Xu et al. 2015, sec. 4.1: 0.5).
    hard_expectation_draw: "sentence", one draw per sentence, or "batch", one per batch for
      all its sentences, as Xu et al.'s code does (capgen.py, `semi_sampling_p`).
    gru_reset: before | after; None = the paper's (before for encdec/rnnsearch, else after).
    rnn_cell: gru | lstm (luong decoder only).
    summary: avg | cavg (self_attentive_residual only).
    summary_units: hidden size of the cavg and state-memory scores (default: decoder_units).
    dropout: rate on embeddings and on the output layer's hidden state.
    source_word_dropout, target_word_dropout: rates at which whole words are dropped while
      training: every dimension of a token's embedding zeroed together, the kept ones scaled
      by 1 / (1 - rate) (Nematus' dropout_source / dropout_target; Sennrich and Zhang 2019).
    embedding_dropout: variational dropout on both sides' embeddings while training: one mask
      per sentence over the embedding dimensions, the same at every position (Gal and
      Ghahramani 2016; Nematus' dropout_embedding), after word dropout and `dropout`.
    hidden_dropout: variational (recurrent) dropout while training: every GRU of the encoder
      and of the cgru-family decoders reads U (m (.) h_{t-1}) with one mask m per sentence
      (Gal and Ghahramani 2016; Nematus' dropout_hidden; reset-after GRUs only).
    decoder_transition_depth: GRU transitions per target step of the cgru-family decoders,
      >= 2: GRU1 and GRU2 of the cGRU, then GRUs without input (a deep transition; Miceli
      Barone et al. 2017, "Deep Architectures for Neural Machine Translation"; Nematus'
      dec_base_recurrence_transition_depth).
    image_size: height and width of the images of the image encoder (resized to it).
    image_backbone: image encoder: None (a convnet trained from scratch) or a
      keras.applications model as "module.Class", e.g. "resnet50.ResNet50".
    image_backbone_weights: that backbone's weights (without its top) in a local file; they
      are loaded and frozen. None: the backbone starts at random and trains.
    image_coordinates: image encoder: append each cell's column and row to its features, so
      that an annotation knows where in the image it is (Liu et al. 2018).
    lexical_model: add the logits of Nguyen and Chiang's (2018) lexical model, which reads
      the attention-weighted source embeddings (layers/lexical.py; decoders with attention).
    layer_norm: layer-normalized GRU transitions, as Nematus' (docs/EQUATIONS.md "Layer
      normalization"): every GRU of the encoder and of the cgru-family decoders normalizes
      its input and state projections (reset-after GRUs only).
    tie_embeddings: none | target (the output projection is the target embedding table,
      scaled by embedding_dim^-1/2; Press and Wolf 2017) | all (also the source embeddings:
      one table, which needs a shared vocabulary).
    scale_embeddings: store each embedding table at embedding_dim^-1/2 of its scale and
      multiply its lookups by embedding_dim^1/2 (Vaswani et al. 2017; layers/embedding.py):
      the same function, but Adam then moves the table, and a tied output projection,
      embedding_dim^1/2 times faster relative to its size.
    embedding_init_std: standard deviation of a normal initialisation of both embedding
      tables (default 1.0, as torch.nn.Embedding); None gives Keras' uniform(+-0.05), with
      which every activation starts near zero: on Multi30k Adam then learnt the unigram
      distribution through a saturated output layer and stayed stuck there
      (docs/DESIGN.md, "Initialisation").
  """

  src_vocab_size: int = 8000
  tgt_vocab_size: int = 8000
  embedding_dim: int = 256
  encoder: str = "birnn"
  encoder_units: int = 512
  encoder_layers: int = 1
  reverse_source: bool = False
  conv_kernel_size: int = 3
  decoder: str = "cgru"
  decoder_units: int = 512
  output_units: Optional[int] = None
  attention: Optional[str] = None
  attention_units: Optional[int] = None
  attention_mode: str = "soft"
  hard_inference: str = "expectation"
  hard_expectation_rate: float = 0.0
  hard_expectation_draw: str = "sentence"
  gru_reset: Optional[str] = None
  rnn_cell: str = "gru"
  summary: str = "avg"
  summary_units: Optional[int] = None
  dropout: float = 0.0
  embedding_init_std: Optional[float] = 1.0
  source_word_dropout: float = 0.0
  target_word_dropout: float = 0.0
  tie_embeddings: str = "none"
  scale_embeddings: bool = False
  layer_norm: bool = False
  embedding_dropout: float = 0.0
  hidden_dropout: float = 0.0
  decoder_transition_depth: int = 2
  lexical_model: bool = False
  image_size: int = 64
  image_backbone: Optional[str] = None
  image_backbone_weights: Optional[str] = None
  image_coordinates: bool = True

  def __post_init__(self):
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if field.type in (int, Optional[int]) and value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
          raise ConfigError(f"Received {field.name}={value!r}; expected a positive integer.")
    if self.attention is not None and self.attention not in ATTENTIONS:
      raise ConfigError(f"Received attention={self.attention!r}; expected one of {ATTENTIONS} "
                        "or None for the paper's choice.")
    choices = {"encoder": ENCODERS, "decoder": DECODERS,
               "attention_mode": ATTENTION_MODES, "hard_inference": HARD_INFERENCE,
               "rnn_cell": RNN_CELLS, "summary": SUMMARIES, "tie_embeddings": TIE_EMBEDDINGS}
    for key, allowed in choices.items():
      if getattr(self, key) not in allowed:
        raise ConfigError(f"Received {key}={getattr(self, key)!r}; expected one of {allowed}.")
    if self.gru_reset is not None and self.gru_reset not in GRU_RESETS:
      raise ConfigError(f"Received gru_reset={self.gru_reset!r}; expected one of {GRU_RESETS} "
                        "or None for the paper's choice.")
    for key in ("reverse_source", "layer_norm", "lexical_model", "image_coordinates"):
      if not isinstance(getattr(self, key), bool):
        raise ConfigError(f"Received {key}={getattr(self, key)!r}; expected a bool.")
    if self.reverse_source and self.encoder != "rnn":
      raise ConfigError(f"Received reverse_source=True with encoder={self.encoder!r}; source "
                        "reversal needs encoder='rnn'.")
    for key in ("dropout", "source_word_dropout", "target_word_dropout", "embedding_dropout",
                "hidden_dropout", "hard_expectation_rate"):
      value = getattr(self, key)
      if not _is_number(value) or not 0.0 <= value < 1.0:
        raise ConfigError(f"Received {key}={value!r}; expected a rate in [0, 1).")
    if self.embedding_init_std is not None and not (
        _is_number(self.embedding_init_std) and self.embedding_init_std > 0):
      raise ConfigError(f"Received embedding_init_std={self.embedding_init_std!r}; expected a "
                        "standard deviation > 0, or None for Keras' uniform(+-0.05).")
    if self.conv_kernel_size % 2 == 0:
      raise ConfigError(f"Received conv_kernel_size={self.conv_kernel_size}; expected an odd "
                        "width.")
    if self.rnn_cell != "gru" and self.decoder != "luong":
      raise ConfigError(f"Received rnn_cell={self.rnn_cell!r} with decoder={self.decoder!r}; "
                        "only the luong decoder has an LSTM option.")
    if (self.attention_score == "dot" and self.decoder != "encdec"
        and self.memory_dim != self.decoder_units):
      raise ConfigError(
          f"attention='dot' needs the annotation size ({self.memory_dim}) to equal "
          f"decoder_units ({self.decoder_units}); e.g. set encoder_units="
          f"{self.decoder_units // 2 if self.encoder == 'birnn' else self.decoder_units} or "
          "use attention='general'.")
    if self.tie_embeddings != "none" and self.output_input_dim != self.embedding_dim:
      what = ("decoder_units" if self.decoder == "luong" else "output_units")
      raise ConfigError(f"Received tie_embeddings={self.tie_embeddings!r} with {what}="
                        f"{self.output_input_dim} and embedding_dim={self.embedding_dim}; the "
                        f"tied output projection needs them equal: set {what}="
                        f"{self.embedding_dim}, or tie_embeddings='none'.")
    if self.tie_embeddings == "all" and self.src_vocab_size != self.tgt_vocab_size:
      raise ConfigError(f"Received tie_embeddings='all' with vocabularies of "
                        f"{self.src_vocab_size} and {self.tgt_vocab_size} words; one table "
                        "needs one shared vocabulary (tokenizer.shared=True).")
    if self.layer_norm and self.decoder in ("encdec", "rnnsearch", "luong"):
      raise ConfigError(f"Received layer_norm=True with decoder={self.decoder!r}; the "
                        "layer-normalized GRUs are those of the cgru-family decoders (cgru, "
                        "self_attentive_residual, memory_rnn, self_attentive_rnn).")
    if self.layer_norm and not self.reset_after:
      raise ConfigError("Received layer_norm=True with gru_reset='before'; the layer-normalized "
                        "GRU is the reset-after one: set gru_reset='after' or None.")
    if self.hidden_dropout and self.decoder in ("encdec", "rnnsearch", "luong"):
      raise ConfigError(f"Received hidden_dropout={self.hidden_dropout} with decoder="
                        f"{self.decoder!r}; recurrent dropout is that of the cgru-family "
                        "decoders (cgru, self_attentive_residual, memory_rnn, "
                        "self_attentive_rnn) and their GRU encoders.")
    if self.decoder_transition_depth < 2 or (self.decoder_transition_depth > 2 and self.decoder
                                             in ("encdec", "rnnsearch", "luong")):
      raise ConfigError(f"Received decoder_transition_depth={self.decoder_transition_depth} "
                        f"with decoder={self.decoder!r}; expected 2 (GRU1 and GRU2), or more "
                        "with a cgru-family decoder.")
    if self.hidden_dropout and not self.reset_after:
      raise ConfigError("Received hidden_dropout with gru_reset='before'; recurrent dropout "
                        "needs the reset-after GRU: set gru_reset='after' or None.")
    if self.lexical_model and self.decoder == "encdec":
      raise ConfigError("Received lexical_model=True with decoder='encdec', which has no "
                        "attention to weight the source words; pick an attention decoder.")
    self._check_image()
    if self.hard_expectation_draw not in HARD_EXPECTATION_DRAWS:
      raise ConfigError(f"Received hard_expectation_draw={self.hard_expectation_draw!r}; "
                        f"expected one of {HARD_EXPECTATION_DRAWS}.")
    if self.hard_expectation_rate and self.attention_mode != "hard":
      raise ConfigError(f"Received hard_expectation_rate={self.hard_expectation_rate} with "
                        "attention_mode='soft'; it mixes the expectation into hard attention: "
                        "set attention_mode='hard' or leave it at 0.")
    if self.attention_mode == "hard" and self.decoder == "encdec":
      raise ConfigError("Received attention_mode='hard' with decoder='encdec', which has no "
                        "attention; pick an attention decoder.")

  def _check_image(self):
    """The image encoder's settings, and what a source without words rules out."""
    if self.encoder != "image":
      if self.image_backbone is not None or self.image_backbone_weights is not None:
        raise ConfigError(f"Received image_backbone={self.image_backbone!r} with encoder="
                          f"{self.encoder!r}; a backbone is part of encoder='image'.")
      return
    for key, off in (("lexical_model", False), ("source_word_dropout", 0.0)):
      if getattr(self, key) != off:
        raise ConfigError(f"Received {key}={getattr(self, key)!r} with encoder='image'; an "
                          "image has no source words: leave it off.")
    if self.tie_embeddings == "all":
      raise ConfigError("Received tie_embeddings='all' with encoder='image'; an image has no "
                        "source embeddings to tie: use 'target' or 'none'.")
    if self.image_backbone is None and self.image_size % 2 ** self.encoder_layers:
      raise ConfigError(f"Received image_size={self.image_size} with encoder_layers="
                        f"{self.encoder_layers}; the convnet halves the image "
                        f"{self.encoder_layers} times: set image_size to a multiple of "
                        f"{2 ** self.encoder_layers}.")
    if self.image_backbone_weights is not None and self.image_backbone is None:
      raise ConfigError("Received image_backbone_weights without image_backbone; name the "
                        "keras.applications model they belong to, e.g. "
                        "image_backbone='resnet50.ResNet50'.")

  @property
  def attention_score(self):
    """Attention score in effect (explicit attention or the paper's default)."""
    return self.attention or ("general" if self.decoder == "luong" else "additive")

  @property
  def output_input_dim(self):
    """Size of the vector the output projection W_o multiplies (`output_input_size`)."""
    return output_input_size(self.decoder, self.decoder_units, self.output_units,
                             self.embedding_dim)

  @property
  def memory_dim(self):
    """Size of the annotations h_i the encoder produces."""
    if self.encoder == "birnn":
      return 2 * self.encoder_units
    if self.encoder == "embedding":
      return self.embedding_dim
    return self.encoder_units  # conv channels, or the image annotation size

  @property
  def reset_after(self):
    """GRU reset placement in effect (explicit gru_reset or the paper's default)."""
    return (self.gru_reset or DEFAULT_RESET.get(self.decoder, "after")) == "after"

  def to_dict(self):
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values):
    """Builds a config from a mapping; unknown keys are an error."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ConfigError(f"Unknown model config key(s) {unknown}; known keys: {sorted(known)}.")
    return cls(**values)

  def replace(self, **changes):
    return self.from_dict({**self.to_dict(), **changes})


def output_input_size(decoder: str, decoder_units: int, output_units: Optional[int],
                      embedding_dim: int) -> int:
  """Size of the vector the output projection W_o multiplies: the deep output's hidden
  layer (output_units, default embedding_dim), or luong's attentional state (decoder_units).
  A function of the fields alone, so that a recipe can ask it of a config it has not
  validated yet."""
  if decoder == "luong":
    return decoder_units
  return output_units or embedding_dim
