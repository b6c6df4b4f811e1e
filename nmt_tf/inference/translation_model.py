"""The Python API for a trained run: `nmt_tf.load(run_dir)` -> TranslationModel.

  import nmt_tf
  model = nmt_tf.load("runs/quickstart")
  best = model.translate(["a sentence"], beam_size=5)[0]
  best.text, best.score, best.alignment          # alignment: [target tokens, source tokens]
  model.score(["a sentence"], [best.text])[0].log_prob

It runs what `run.py translate` and `run.py score` run (the same Translator, search and
tokenizers), on python lists instead of files.
"""

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

from nmt_tf.inference import alignments
from nmt_tf.inference.batch_translate import CompiledTranslator, translate_lines
from nmt_tf.inference.forced_scoring import ForcedScore, ForcedScorer
from nmt_tf.inference.loading import load_models
from nmt_tf.inference.translator import Translator


@dataclasses.dataclass
class Translation:
  """One translation of a sentence.

  Attributes:
    text: the detokenized translation ("" for an empty input).
    score: the search's ranking score (log-probability after length and coverage penalties).
    log_prob: log P(translation | source), EOS included.
    source_tokens: the source as the model read it, EOS last.
    target_tokens: the translation's tokens, EOS last.
    alignment: float32 [len(target_tokens), len(source_tokens)], the attention weights.
    alternatives: the next best translations (with `nbest` > 1), best first.
    truncated: the source was cut to the run's maximum input length.
  """

  text: str
  score: float
  log_prob: float
  source_tokens: List[str]
  target_tokens: List[str]
  alignment: np.ndarray
  alternatives: List["Translation"] = dataclasses.field(default_factory=list)
  truncated: bool = False


class TranslationModel:
  """A trained run, ready to translate and score python strings.

  Args:
    run_dir: the run directory (config, vocabularies, checkpoints).
    checkpoint: "best" (default), "last" or a checkpoint prefix.
    checkpoints: optional ensemble members (checkpoint prefixes or run directories).
    max_input_tokens: longer inputs are cut to this many tokens.
  """

  def __init__(self, run_dir, checkpoint="best", checkpoints=None, max_input_tokens=200):
    model, config, src_tok, tgt_tok, self.checkpoints = load_models(run_dir, checkpoint,
                                                                    checkpoints)
    self.config = config
    self.translator = Translator(model, src_tok, tgt_tok, config.decode, max_input_tokens,
                                 reverse_source=config.pipeline.reverse_source)
    self._compiled = {}
    self._scorer = None

  def translate(self, sentences: Sequence[str], beam_size: Optional[int] = None,
                nbest: int = 1, batch_size: Optional[int] = None) -> List[Translation]:
    """Translates each sentence; returns one Translation per sentence, in order.

    Args:
      sentences: python strings.
      beam_size: 1 = greedy; default: the run's decode.beam_size.
      nbest: translations per sentence (<= beam_size): the best, and nbest - 1 alternatives.
      batch_size: sentences per search call; default: the run's decode.batch_size.
    """
    decode = self.config.decode
    beam_size = beam_size or decode.beam_size
    if not 1 <= nbest <= beam_size:
      raise ValueError(f"Received nbest={nbest}; expected 1 <= nbest <= beam_size={beam_size}.")
    key = (beam_size, nbest)
    if key not in self._compiled:
      self._compiled[key] = CompiledTranslator(self.translator, beam_size, nbest)
    results = translate_lines(self._compiled[key], list(sentences),
                              batch_size or decode.batch_size)
    return [self._translation(r) for r in results]

  def score(self, sources: Sequence[str], targets: Sequence[str],
            batch_size: Optional[int] = None) -> List[ForcedScore]:
    """log P(target | source) of each pair (forced decoding): ForcedScore per pair, with
    log_prob, num_tokens (EOS included), token_log_probs and per_token."""
    if self._scorer is None:
      self._scorer = ForcedScorer(self.translator)
    return self._scorer.score(list(sources), list(targets),
                              batch_size or self.config.decode.batch_size)

  def _translation(self, result):
    src_tok, tgt_tok = self.translator.source_tokenizer, self.translator.target_tokenizer
    src_tokens = alignments.source_tokens(src_tok, result.source, len(result.source_ids) - 1)
    hyps = []
    for hyp in result.hypotheses:
      hyps.append(Translation(hyp.text, hyp.score, hyp.log_prob, src_tokens,
                              alignments.target_tokens(tgt_tok, hyp.ids),
                              np.asarray(hyp.attention, np.float32), truncated=result.truncated))
    if not hyps:  # an empty input
      return Translation("", 0.0, 0.0, [], [], np.zeros([0, 0], np.float32))
    hyps[0].alternatives = hyps[1:]
    return hyps[0]


def load(run_dir, checkpoint="best", checkpoints=None, max_input_tokens=200):
  """A TranslationModel of a trained run (see TranslationModel)."""
  return TranslationModel(run_dir, checkpoint, checkpoints, max_input_tokens)
