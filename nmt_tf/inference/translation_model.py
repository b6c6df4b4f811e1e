"""The Python API for a trained run: `nmt_tf.load(run_dir)` -> TranslationModel.

  import nmt_tf
  model = nmt_tf.load("runs/quickstart")
  best = model.translate(["a sentence"], beam_size=5)[0]
  best.text, best.score, best.alignment          # alignment: [target tokens, source tokens]
  best.words, best.word_log_probs                # confidence of each word
  model.translate("ein Hund läuft", prefix="A dog r").text   # continues "A dog r..."
  model.score(["a sentence"], [best.text])[0].log_prob

It runs what `nmt-tf translate` and `nmt-tf score` run (the same Translator, search and
tokenizers), on python lists instead of files. One string instead of a list gives one result
instead of a list. What a caller can get wrong (a sentence that is not a str, a beam size that
is not a positive int) raises TypeError or ValueError naming the argument.
"""

import dataclasses
import numbers
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from nmt_tf.data import target_tags
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.inference import alignments
from nmt_tf.inference import shortlist as shortlist_lib
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
    piece_log_probs: log p(piece | previous pieces, source) of each target token (EOS last).
    words: the translation's words (its pieces joined; EOS left out).
    word_log_probs: each word's log-probability, the sum over its pieces (confidence).
  """

  text: str
  score: float
  log_prob: float
  source_tokens: List[str]
  target_tokens: List[str]
  alignment: np.ndarray
  alternatives: List["Translation"] = dataclasses.field(default_factory=list)
  truncated: bool = False
  piece_log_probs: List[float] = dataclasses.field(default_factory=list)
  words: List[str] = dataclasses.field(default_factory=list)
  word_log_probs: List[float] = dataclasses.field(default_factory=list)


class TranslationModel:
  """A trained run, ready to translate and score python strings.

  Args:
    run_dir: the run directory (config, vocabularies, checkpoints).
    checkpoint: "best" (default), "last" or a checkpoint prefix.
    checkpoints: optional ensemble members (checkpoint prefixes or run directories).
    max_input_tokens: longer inputs are cut to this many tokens.
    shortlist: optional decode.shortlist for this model (translations per source word; 0 =
      the whole vocabulary); None keeps the run's.
    hard_inference: optional "expectation" or "argmax" in place of the run's
      model.hard_inference (a hard-attention run only): the context a decoding step takes.
  """

  def __init__(self, run_dir, checkpoint="best", checkpoints=None, max_input_tokens=200,
               shortlist=None, hard_inference=None):
    model, config, src_tok, tgt_tok, self.checkpoints = load_models(run_dir, checkpoint,
                                                                    checkpoints, hard_inference)
    if shortlist is not None:
      config = dataclasses.replace(config, decode=dataclasses.replace(config.decode,
                                                                      shortlist=shortlist))
    if config.model.encoder == "image":
      raise RunDirError(f"{run_dir} is a captioning run (model.encoder='image'), which "
                        "translates no text; caption images with `nmt-tf caption`.")
    self.config = config
    shortlist = shortlist_lib.load_or_build(run_dir, config.decode, config.data, src_tok,
                                           tgt_tok)
    self.translator = Translator(model, src_tok, tgt_tok, config.decode, max_input_tokens,
                                 shortlist=shortlist,
                                 target_languages=target_tags.target_languages(config.data))
    self._compiled = {}
    self._scorer = None

  def translate(self, sentences: Union[str, Sequence[str]], beam_size: Optional[int] = None,
                nbest: int = 1, batch_size: Optional[int] = None,
                prefix: Union[None, str, Sequence[str]] = None,
                constraints: Optional[Sequence[Sequence[str]]] = None,
                target_lang: Optional[str] = None) -> Union[Translation, List[Translation]]:
    """Translates each sentence; returns one Translation per sentence, in order.

    Args:
      sentences: python strings; or one string, which gives one Translation (not a list).
      beam_size: 1 = greedy; default: the run's decode.beam_size.
      nbest: translations per sentence (<= beam_size): the best, and nbest - 1 alternatives.
      batch_size: sentences per search call; default: the run's decode.batch_size (fewer when
        the search of that many would not fit in memory).
      prefix: the start of each translation (a str per sentence, "" for none; one str with
        one sentence): the search continues from it, and a prefix that does not end with a
        space may have its last word completed ("Ein Hu" -> "Ein Hund ...").
      constraints: the phrases each translation must contain, a list of str per sentence
        ([] for none; one list with one str sentence): lexically constrained beam search
        with dynamic beam allocation (Post and Vilar 2018), also with beam_size 1.
      target_lang: the language to translate into, for a model trained with
        target-language tags (`target_languages`); leave it out for any other.

    Raises:
      TypeError: a sentence or prefix is not a str.
      ValueError: beam_size, nbest or batch_size is not a positive int, nbest > beam_size,
        the prefixes or constraint lists are not one per sentence, a prefix is longer than
        decode.max_length allows, a constraint is empty, holds characters the vocabulary
        lacks or does not fit decode.max_length, or the search of one sentence with this
        beam would not fit in memory; target_lang is not one of `target_languages` (or
        missing for a model that has some).
    """
    lines, single = _sentences(sentences, "sentences")
    lines = self.translator.tag(lines, target_lang)
    prefixes = None
    if prefix is not None:
      prefixes, single_prefix = _sentences(prefix, "prefix")
      if single_prefix != single or len(prefixes) != len(lines):
        raise ValueError(f"Received {len(prefixes)} prefix(es) for {len(lines)} sentence(s); "
                         "expected one per sentence, a str for a str and a list for a list.")
    if constraints is not None:
      constraints = [constraints] if single else list(constraints)
      if len(constraints) != len(lines) or any(isinstance(c, str) for c in constraints):
        raise ValueError(f"Received constraints={constraints!r} for {len(lines)} "
                         "sentence(s); expected a list of phrases per sentence (one list for "
                         "one str sentence).")
      constraints = [list(c) for c in constraints]
      self.translator.check_constraints(constraints)
    if prefixes is not None:
      self.translator.check_prefix(prefixes)
    decode = self.config.decode
    beam_size = _positive_int("beam_size", decode.beam_size if beam_size is None else beam_size)
    nbest = _positive_int("nbest", nbest)
    batch_size = _positive_int("batch_size", batch_size or decode.batch_size)
    if nbest > beam_size:
      raise ValueError(f"Received nbest={nbest}; expected 1 <= nbest <= beam_size={beam_size}.")
    key = (beam_size, nbest)
    if key not in self._compiled:
      self._compiled[key] = CompiledTranslator(self.translator, beam_size, nbest)
    results = [self._translation(r) for r in translate_lines(self._compiled[key], lines,
                                                             batch_size, prefixes=prefixes,
                                                             constraints=constraints)]
    return results[0] if single else results

  @property
  def target_languages(self) -> Tuple[str, ...]:
    """The languages `target_lang` may name: those of a model trained with target-language
    tags (data.target_tags), () for any other."""
    return self.translator.target_languages

  def score(self, sources: Union[str, Sequence[str]], targets: Union[str, Sequence[str]],
            batch_size: Optional[int] = None, target_lang: Optional[str] = None
            ) -> Union[ForcedScore, List[ForcedScore]]:
    """log P(target | source) of each pair (forced decoding): ForcedScore per pair, with
    log_prob, num_tokens (EOS included), token_log_probs and per_token. Two strings give one
    ForcedScore (not a list). `target_lang` as in `translate`.

    Raises:
      TypeError: a sentence is not a str, or one argument is a str and the other a list.
      ValueError: the lists differ in length, or batch_size is not a positive int.
    """
    source_lines, single = _sentences(sources, "sources")
    source_lines = self.translator.tag(source_lines, target_lang)
    target_lines, single_target = _sentences(targets, "targets")
    if single != single_target:
      raise TypeError("Received one of sources and targets as a str and the other as a list; "
                      "pass both as str (one pair) or both as lists of str.")
    batch_size = _positive_int("batch_size", batch_size or self.config.decode.batch_size)
    if self._scorer is None:
      self._scorer = ForcedScorer(self.translator)
    scores = self._scorer.score(source_lines, target_lines, batch_size)
    return scores[0] if single else scores

  def _translation(self, result):
    src_tok, tgt_tok = self.translator.source_tokenizer, self.translator.target_tokenizer
    src_tokens = alignments.source_tokens(src_tok, result.source, len(result.source_ids) - 1)
    hyps = []
    for hyp in result.hypotheses:
      hyps.append(Translation(hyp.text, hyp.score, hyp.log_prob, src_tokens,
                              alignments.target_tokens(tgt_tok, hyp.ids),
                              np.asarray(hyp.attention, np.float32), truncated=result.truncated,
                              piece_log_probs=list(hyp.token_log_probs), words=hyp.words,
                              word_log_probs=hyp.word_log_probs))
    if not hyps:  # an empty input
      return Translation("", 0.0, 0.0, [], [], np.zeros([0, 0], np.float32))
    hyps[0].alternatives = hyps[1:]
    return hyps[0]


def _sentences(value, name):
  """(list of python str, whether `value` was one str) of a translate/score argument."""
  single = isinstance(value, str)
  if single:
    value = [value]
  if isinstance(value, (bytes, bytearray)):
    raise TypeError(f"Received {name} as bytes; expected a str or a list of str (decode the "
                    "bytes first, e.g. value.decode('utf-8')).")
  try:
    lines = list(value)
  except TypeError:
    raise TypeError(f"Received {name}={value!r}; expected a str or a list of str.") from None
  for i, line in enumerate(lines):
    if not isinstance(line, str):
      raise TypeError(f"Received {name}[{i}]={line!r} ({type(line).__name__}); expected a "
                      "str (decode bytes first; give an empty string for no sentence).")
  for i, line in enumerate(lines):
    try:
      line.encode("utf-8")
    except UnicodeEncodeError as error:
      where = f"{name}[{i}]" if not single else name
      raise ValueError(
          f"Received {where} with the lone surrogate {line[error.start]!r} at position "
          f"{error.start}, which is no character; decode its bytes with errors='replace' "
          "(or 'strict' to find the bad bytes).") from None
  return lines, single


def _positive_int(name, value):
  """`value` as an int; ValueError naming `name` unless it is a positive integer."""
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
    raise ValueError(f"Received {name}={value!r}; expected a positive integer.")
  return int(value)


def load(run_dir, checkpoint="best", checkpoints=None, max_input_tokens=200, shortlist=None,
         hard_inference=None):
  """A TranslationModel of a trained run (see TranslationModel)."""
  return TranslationModel(run_dir, checkpoint, checkpoints, max_input_tokens, shortlist,
                          hard_inference)
