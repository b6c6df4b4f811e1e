"""The experiment configuration: model, data, tokenizer, pipeline, training and decoding.

One `ExperimentConfig` of validated sections; each section rejects unknown keys and bad
values. `base_config()` gives the same defaults as an ml_collections ConfigDict, which the
recipes of nmt_tf/configs edit and run.py overrides from the command line
(`--config.model.units=...`).
"""

import dataclasses
import json
import math
import typing

import ml_collections

from nmt_tf.data import CorpusConfig, PipelineConfig, TokenizerConfig
from nmt_tf.experiment import presets
from nmt_tf.experiment import upgrade
from nmt_tf.models.config import ConfigError, ModelConfig

SCHEDULES = ("constant", "inverse_sqrt", "noam", "exponential")
DECODE_PRECISIONS = ("auto", "float32", "float32_bf16_matmul")
PRECISIONS = ("auto", "float32", "float32_bf16_matmul", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multi_worker")
REINFORCE_REWARDS = ("sentence", "to_go", "word_mean", "word")
REINFORCE_BASELINES = ("auto", "moving_average", "leave_one_out", "learned")
CAPTION_CORPORA = ("shapes", "captions")  # images and captions (data/captions.py)


def _check(condition, message):
  if not condition:
    raise ConfigError(message)


def _from_dict(cls, values, section):
  known = {f.name for f in dataclasses.fields(cls)}
  values = dict(values)
  unknown = sorted(set(values) - known)
  _check(not unknown, f"Unknown {section} config key(s) {unknown}; known keys: {sorted(known)}.")
  for key, value in sorted(values.items()):
    _check(not (isinstance(value, float) and not math.isfinite(value)),
           f"Received {section}.{key}={value!r}; expected a finite number.")
  return cls(**values)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Optimisation, validation and checkpointing.

  Attributes:
    steps: total optimizer steps.
    learning_rate: peak Adam learning rate.
    schedule: constant | inverse_sqrt | noam | exponential (after warmup_steps).
    warmup_steps: linear warm-up steps.
    decay_rate, decay_steps: exponential schedule: lr * decay_rate^(step / decay_steps).
    clip_norm: gradient clipping by global norm (0 = off).
    label_smoothing: epsilon of the smoothed cross-entropy.
    moving_average_decay: d of an exponential moving average of the weights that
      validation, early stopping and best/ use (0 = off; training/weight_average.py; Marian's
      --exponential-smoothing 1e-4 is d = 0.9999).
    plateau_factor: f of the learning rate's decay on a plateau: after every
      plateau_patience validations without a BLEU gain the rate is multiplied by f, for the
      rest of the run (0 = off; training/schedules.py; Joey NMT's "plateau" scheduling,
      Marian's --lr-decay-strategy stalled).
    plateau_patience: validations without a BLEU gain before each decay of plateau_factor;
      below patience, which stops the run.
    eval_every: validate (loss, perplexity, greedy BLEU) every N steps.
    eval_max_sentences: validate on at most this many sentences (0 = all).
    checkpoint_every: save a checkpoint every N steps.
    keep_checkpoints: how many recent checkpoints to keep.
    patience: stop after this many validations without a BLEU gain (0 = never).
    max_minutes: wall-clock budget of the training loop in minutes, summed over resumed runs
      (0 = none); when spent, the run validates, saves and stops (Marian's --after 2h).
    precision: float32 | float32_bf16_matmul (float32 with bfloat16 matrix-product operands,
      layers/kernels/precision.py) | mixed_bfloat16 | mixed_float16 (Keras mixed policies) |
      auto: float32_bf16_matmul on a CPU with AVX512_BF16 or AMX-BF16 and no GPU, float32
      elsewhere (nmt_tf/cpu.py), decided at every start and printed.
    strategy: default | mirrored | multi_worker (tf.distribute).
    seed: random seed of the weights and dropout (the data order follows pipeline.seed).
    log_every: console/TensorBoard scalars every N steps.
    jit_compile: XLA-compile the train step.
    alignment_images: attention heat maps of this many validation sentences per validation.
  """

  steps: int = 2000
  learning_rate: float = 1e-3
  schedule: str = "constant"
  warmup_steps: int = 0
  decay_rate: float = 0.5
  decay_steps: int = 10000
  clip_norm: float = 1.0
  label_smoothing: float = 0.0
  moving_average_decay: float = 0.0
  plateau_factor: float = 0.0
  plateau_patience: int = 3
  eval_every: int = 500
  eval_max_sentences: int = 0
  checkpoint_every: int = 500
  keep_checkpoints: int = 3
  patience: int = 0
  max_minutes: float = 0.0
  precision: str = "float32"
  strategy: str = "default"
  seed: int = 1234
  log_every: int = 50
  jit_compile: bool = False
  alignment_images: int = 3

  def __post_init__(self):
    for key in ("steps", "eval_every", "checkpoint_every", "keep_checkpoints", "log_every",
                "decay_steps", "plateau_patience"):
      value = getattr(self, key)
      _check(isinstance(value, int) and value > 0,
             f"Received train.{key}={value!r}; expected a positive integer.")
    for key in ("warmup_steps", "patience", "eval_max_sentences", "alignment_images"):
      value = getattr(self, key)
      _check(isinstance(value, int) and value >= 0,
             f"Received train.{key}={value!r}; expected an integer >= 0.")
    _check(self.learning_rate > 0, f"Received train.learning_rate={self.learning_rate!r}; "
           "expected a positive number.")
    _check(self.schedule in SCHEDULES,
           f"Received train.schedule={self.schedule!r}; expected one of {SCHEDULES}.")
    _check(self.precision in PRECISIONS,
           f"Received train.precision={self.precision!r}; expected one of {PRECISIONS}.")
    _check(self.strategy in STRATEGIES,
           f"Received train.strategy={self.strategy!r}; expected one of {STRATEGIES}.")
    _check(isinstance(self.max_minutes, (int, float)) and self.max_minutes >= 0,
           f"Received train.max_minutes={self.max_minutes!r}; expected minutes >= 0 "
           "(0 = no time budget).")
    _check(self.clip_norm >= 0, f"Received train.clip_norm={self.clip_norm!r}; expected >= 0.")
    _check(0 <= self.label_smoothing < 1, f"Received train.label_smoothing="
           f"{self.label_smoothing!r}; expected a value in [0, 1).")
    _check(0 < self.decay_rate <= 1, f"Received train.decay_rate={self.decay_rate!r}; "
           "expected a value in (0, 1].")
    _check(isinstance(self.moving_average_decay, (int, float))
           and 0 <= self.moving_average_decay < 1, "Received train.moving_average_decay="
           f"{self.moving_average_decay!r}; expected a value in [0, 1) (0 = off).")
    _check(isinstance(self.plateau_factor, (int, float)) and 0 <= self.plateau_factor < 1,
           f"Received train.plateau_factor={self.plateau_factor!r}; expected a value in "
           "[0, 1) (0 = off).")
    _check(not (self.plateau_factor and self.patience
                and self.plateau_patience >= self.patience),
           f"Received train.plateau_patience={self.plateau_patience}, not below "
           f"train.patience={self.patience}: the run would stop before the learning rate "
           "decays; lower plateau_patience or raise patience.")

@dataclasses.dataclass(frozen=True)
class ReinforceConfig:
  """The REINFORCE objective of hard attention (Xu et al. 2015, sec. 4.1;
  training/objectives.py); every field but the defaults needs model.attention_mode='hard'.

  Attributes:
    weight: lambda_r, the weight of the REINFORCE term (Xu et al. 2015, eq. 12).
    samples: N, sequences of attention decisions per sentence. With N > 1 each sentence is
      decoded N times, the loss is the mean over the N, and each sample's baseline may be the
      mean reward of the sentence's other N - 1 samples.
    reward: the reward of the decision at step t: "sentence", the sentence's log-likelihood R
      (Xu et al. 2015); "word_mean", R / |y|, the mean per word (Xu et al.'s code,
      `RL_sumCost`); "to_go", R_t = sum_{t' >= t} log p(y_t'), the words that decision
      reaches; "word", r_t = log p(y_t), the word it is drawn for (biased: it leaves out the
      decision's effect on the later words, for less variance).
    baseline: b: "moving_average" of the batches' mean reward (decay baseline_decay);
      "leave_one_out", the mean reward of the sentence's other samples (samples > 1);
      "learned", b(s_{t-1}) = w^T s_{t-1} + b_0 on the state each decision is drawn from,
      regressed on the reward (Mnih et al. 2014); "auto": leave_one_out with several
      samples, else moving_average.
    baseline_decay: the decay of the moving averages (the baseline, the reward's variance).
    normalize: divide R - b by max(1, sigma), sigma^2 a moving average of (R - b)^2 (Mnih and
      Gregor 2014).
    start: the first sampling step: before it, every sentence takes the expected context
      sum_i alpha_i h_i (soft attention) and REINFORCE has no term; from it on,
      model.hard_expectation_rate applies (0 = from the first step).
    entropy_weight: lambda_e, the bonus for the entropy of alpha_t (Xu et al. 2015, eq. 12).
  """

  weight: float = 1.0
  samples: int = 1
  reward: str = "sentence"
  baseline: str = "auto"
  baseline_decay: float = 0.99
  normalize: bool = False
  start: int = 0
  entropy_weight: float = 0.0

  def __post_init__(self):
    _check(self.reward in REINFORCE_REWARDS, f"Received reinforce.reward={self.reward!r}; "
           f"expected one of {REINFORCE_REWARDS}.")
    _check(self.baseline in REINFORCE_BASELINES, f"Received reinforce.baseline="
           f"{self.baseline!r}; expected one of {REINFORCE_BASELINES}.")
    _check(isinstance(self.samples, int) and self.samples > 0,
           f"Received reinforce.samples={self.samples!r}; expected a positive integer.")
    _check(self.baseline != "leave_one_out" or self.samples > 1,
           "Received reinforce.baseline='leave_one_out' with reinforce.samples="
           f"{self.samples!r}; it needs the other samples of a sentence: set samples to 2 or "
           "more.")
    _check(isinstance(self.start, int) and self.start >= 0,
           f"Received reinforce.start={self.start!r}; expected an integer >= 0.")
    _check(self.entropy_weight >= 0, "Received reinforce.entropy_weight="
           f"{self.entropy_weight!r}; expected a weight >= 0.")
    _check(0 <= self.baseline_decay < 1, "Received reinforce.baseline_decay="
           f"{self.baseline_decay!r}; expected a value in [0, 1).")
    _check(self.weight >= 0, f"Received reinforce.weight={self.weight!r}; expected a weight "
           ">= 0.")

  def baseline_kind(self):
    """The baseline in effect: `baseline`, with "auto" resolved."""
    if self.baseline == "auto":
      return "leave_one_out" if self.samples > 1 else "moving_average"
    return self.baseline


SHORTLIST_CANDIDATES = 100  # translations kept per source word in a run's shortlist table


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
  """Search settings for validation, translate, evaluate and export.

  Attributes:
    beam_size: 1 = greedy.
    nbest: hypotheses returned per sentence (<= beam_size).
    length_penalty: GNMT alpha (0 = no length normalisation).
    coverage_penalty: GNMT beta (0 = off).
    max_length: static cap on output tokens (incl. EOS).
    max_length_a, max_length_b: per-sentence cap a * source_length + b.
    min_length: EOS forbidden before this many tokens.
    batch_size: sentences per decoding batch.
    compact_batch: the search drops finished sentences from the steps' batch (same
      result, less work when lengths differ; decoding/greedy.py). Off under XLA and in the
      LiteRT export, which need static shapes.
    precision: float32 | float32_bf16_matmul | auto, as train.precision: the search's matrix
      products with bfloat16 operands (layers/kernels/precision.py; docs/PERFORMANCE.md,
      "Design choices, measured": bfloat16 products in the search), or auto, float32_bf16_matmul where the CPU has
      AVX512_BF16 or AMX-BF16. A model trained with float32_bf16_matmul searches so
      whatever this says.
    shortlist: a vocabulary shortlist for the output layer (inference/shortlist.py, Marian's
      lexical shortlist): the search scores, per batch, only the target words among the
      `shortlist` best translations of each source word and the `shortlist_frequent` most
      frequent target words. 0 = the whole vocabulary (exact). translate and evaluate only;
      built from the run's training data on first use.
    shortlist_frequent: the most frequent target words always in the shortlist.
  """

  beam_size: int = 5
  nbest: int = 1
  length_penalty: float = 0.6
  coverage_penalty: float = 0.0
  max_length: int = 128
  max_length_a: float = 2.0
  max_length_b: float = 10.0
  min_length: int = 0
  batch_size: int = 64
  compact_batch: bool = True
  precision: str = "float32"
  shortlist: int = 0
  shortlist_frequent: int = 100

  def __post_init__(self):
    _check(self.precision in DECODE_PRECISIONS, f"Received decode.precision="
           f"{self.precision!r}; expected one of {DECODE_PRECISIONS}.")
    for key in ("beam_size", "nbest", "max_length", "batch_size"):
      value = getattr(self, key)
      _check(isinstance(value, int) and value > 0,
             f"Received decode.{key}={value!r}; expected a positive integer.")
    _check(self.nbest <= self.beam_size, f"Received decode.nbest={self.nbest} > "
           f"decode.beam_size={self.beam_size}; raise beam_size or lower nbest.")
    _check(self.length_penalty >= 0 and self.coverage_penalty >= 0,
           "Received a negative decode.length_penalty or decode.coverage_penalty; expected >= 0.")
    _check(isinstance(self.min_length, int) and 0 <= self.min_length < self.max_length,
           f"Received decode.min_length={self.min_length!r}; expected 0 <= min_length < "
           f"max_length={self.max_length}.")
    _check(isinstance(self.shortlist, int) and 0 <= self.shortlist <= SHORTLIST_CANDIDATES,
           f"Received decode.shortlist={self.shortlist!r}; expected 0 (off) to "
           f"{SHORTLIST_CANDIDATES} translations per source word.")
    _check(isinstance(self.shortlist_frequent, int) and self.shortlist_frequent >= 0,
           f"Received decode.shortlist_frequent={self.shortlist_frequent!r}; expected an "
           "integer >= 0.")


SECTIONS = {"model": ModelConfig, "data": CorpusConfig, "tokenizer": TokenizerConfig,
            "pipeline": PipelineConfig, "train": TrainConfig, "reinforce": ReinforceConfig,
            "decode": DecodeConfig}


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """All settings of one run; `model`'s vocabulary sizes are filled from the tokenizers."""

  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  data: CorpusConfig = dataclasses.field(default_factory=CorpusConfig)
  tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
  pipeline: PipelineConfig = dataclasses.field(default_factory=PipelineConfig)
  train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
  reinforce: ReinforceConfig = dataclasses.field(default_factory=ReinforceConfig)
  decode: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)

  def __post_init__(self):
    _check(self.model.tie_embeddings != "all" or self.tokenizer.shared,
           "Received model.tie_embeddings='all' with tokenizer.shared=False; one embedding "
           "table for both sides needs one vocabulary: set tokenizer.shared=True.")
    images = self.data.name in CAPTION_CORPORA
    _check(images == (self.model.encoder == "image"),
           f"Received data.name={self.data.name!r} with model.encoder={self.model.encoder!r}; "
           "images need the image encoder and sentences a text encoder: caption with "
           "model.encoder='image' and data.name 'shapes' or 'captions' (`nmt-tf train "
           "--config=shapes`), translate with a text corpus.")
    _check(not images or self.pipeline.batch_size > 0,
           "Received pipeline.batch_size=0 for captioning, which batches images by number, "
           "not by tokens: set pipeline.batch_size, e.g. 32.")
    _check(self.pipeline.subword_alpha == 0 or (self.tokenizer.kind == "sentencepiece"
                                                and not images),
           f"Received pipeline.subword_alpha={self.pipeline.subword_alpha!r} with "
           f"tokenizer.kind={self.tokenizer.kind!r}; subword sampling draws SentencePiece "
           "segmentations of sentence pairs: set tokenizer.kind='sentencepiece' or "
           "pipeline.subword_alpha=0.")
    changed = [f"reinforce.{field.name}={getattr(self.reinforce, field.name)!r}"
               for field in dataclasses.fields(ReinforceConfig)
               if getattr(self.reinforce, field.name) != field.default]
    _check(not changed or self.model.attention_mode == "hard",
           f"Received {', '.join(changed)} with model.attention_mode="
           f"{self.model.attention_mode!r}: they train hard attention; set "
           "model.attention_mode='hard' or leave them at their defaults.")

  def to_dict(self):
    return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

  @classmethod
  def from_dict(cls, values, run_format=1):
    """Validates a nested mapping (ConfigDict or dict) of run format `run_format`
    (experiment/upgrade.py); unknown sections/keys are errors."""
    values = values.to_dict() if hasattr(values, "to_dict") else dict(values)
    values = upgrade.upgrade_config(values, run_format)
    unknown = sorted(set(values) - set(SECTIONS))
    _check(not unknown, f"Unknown config section(s) {unknown}; expected {sorted(SECTIONS)}.")
    sections = {}
    for name, section_cls in SECTIONS.items():
      try:
        sections[name] = _from_dict(section_cls, dict(values.get(name, {})), name)
      except (TypeError, ValueError) as error:
        if isinstance(error, ConfigError):
          raise
        raise ConfigError(f"Invalid {name} config: {error}") from error
    return cls(**sections)

  def replace(self, **sections):
    return dataclasses.replace(self, **sections)

  def to_json(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text, run_format=1):
    return cls.from_dict(json.loads(text), run_format)


def _placeholder_type(field):
  """The non-None type of an Optional[...] dataclass field."""
  args = [a for a in typing.get_args(field.type) if a is not type(None)]
  return args[0] if args else field.type


def base_config(model=None):
  """The defaults as an ml_collections ConfigDict (Optional fields as typed placeholders),
  with the fields of model preset `model` (experiment/presets.py) when one is named."""
  root = ml_collections.ConfigDict()
  for name, section_cls in SECTIONS.items():
    section = ml_collections.ConfigDict()
    for field in dataclasses.fields(section_cls):
      default = getattr(section_cls(), field.name)
      if default is None:
        default = ml_collections.config_dict.placeholder(_placeholder_type(field))
      section[field.name] = default
    root[name] = section
  if model is not None:
    root.model.update(presets.model_fields(model))
  return root
