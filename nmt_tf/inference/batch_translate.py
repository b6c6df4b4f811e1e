"""Translates a list of lines in batches and returns python results per sentence.

Used by `run.py translate` and `run.py evaluate`. The graph work is three `tf.function`s
with fixed input signatures (`CompiledTranslator`): tokenization, search (optionally
XLA-compiled) and detokenization, so new batch sizes and lengths never retrace. Lines are
sorted by length before batching (less padding) and returned in input order; empty lines
are not decoded and give empty translations.
"""

import dataclasses
from typing import List, Optional

import numpy as np
import tensorflow as tf

from nmt_tf import decoding
from nmt_tf import special_tokens
from nmt_tf.inference import confidence
from nmt_tf.inference import search_memory
from nmt_tf.inference.translator import CONSTRAINT_SEPARATOR

_TOKENIZE_CHUNK = 4096

# Inputs of up to this many lines are decoded eagerly (CompiledTranslator(eager=True)): the
# reference Multi30k model, 2-core AMD EPYC, first call of one to four test sentences, eager
# against traced: greedy 0.62-0.79 s against 0.86-1.14 s, beam 5 0.84-0.97 s against
# 1.47-1.75 s; eight sentences, greedy: 1.52 s against 1.26 s.
EAGER_LINES = 4


class CompiledTranslator:
  """The compiled stages of `Translator.translate` for one beam size and nbest.

  Args:
    translator: an nmt_tf.inference.Translator.
    beam_size, nbest: python ints (None = the translator's decode config).
    jit_compile: XLA-compile the search (`tf.function(jit_compile=True)`); XLA still
      compiles once per distinct input shape, but the function is traced only once.
    eager: run the stages op by op, untraced. Tracing the search and its first run
      take 1.1-1.7 s on a 2-core CPU; a few sentences are decoded eagerly in less
      (`EAGER_LINES`), more are faster traced.
  """

  # The tensors of a decoding.Prefix and of decoding.Constraints.
  _PREFIX_SPECS = (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                   tf.TensorSpec([None, None, None], tf.bool), tf.TensorSpec([None], tf.int32),
                   tf.TensorSpec([None], tf.int32))
  _CONSTRAINT_SPECS = (tf.TensorSpec([None, None], tf.int32),
                       tf.TensorSpec([None, None], tf.bool))

  def __init__(self, translator, beam_size=None, nbest=None, jit_compile=False, eager=False):
    self.translator = translator
    cfg = translator.decode_config
    self.beam_size = beam_size or cfg.beam_size
    self.nbest = nbest or (cfg.nbest if self.beam_size > 1 else 1)
    self.compact = False if jit_compile else None  # XLA needs static shapes
    self.jit_compile, self.eager = jit_compile, eager
    self._searches = {}  # (with a prefix, with constraints) -> the search
    self.search = self._search_fn(False, False)  # source ids -> the DecodeResult as a dict
    strings = tf.TensorSpec([None], tf.string)
    ids = tf.TensorSpec([None, None], tf.int32)
    compile_ = (lambda f, *specs: f) if eager else (  # pylint: disable=g-long-ternary
        lambda f, *specs: tf.function(f, input_signature=list(specs), autograph=False))
    self.source_ids = compile_(lambda text: translator.source_ids(text), strings)
    self.prefix = compile_(lambda text: translator.prefix(text)[0], strings)
    self.constraints = compile_(lambda text: translator.constraints(text), strings)
    self.as_typed = compile_(lambda prefix, text: translator.as_typed(prefix, text), strings,
                             tf.TensorSpec([None, None], tf.string))
    self.detokenize = compile_(lambda i: translator.target_tokenizer.detokenize(i), ids)
    self.words = compile_(self._words, tf.TensorSpec([None, None, None], tf.int32),
                          tf.TensorSpec([None, None, None], tf.float32),
                          tf.TensorSpec([None, None], tf.int32))

  def _search_fn(self, with_prefix, with_constraints):
    """The search of source ids [batch, src_len] (then the tensors of a `decoding.Prefix`, then
    those of `decoding.Constraints`, if with them) -> the DecodeResult as a dict: traced once
    per combination of the optional parts, unless eager."""
    key = (with_prefix, with_constraints)
    if key not in self._searches:
      def run(source, *parts):
        prefix = decoding.Prefix(*parts[:5]) if with_prefix else None
        constraints = decoding.Constraints(*parts[-2:]) if with_constraints else None
        return self.translator.translate_ids(source, self.beam_size, self.nbest, self.compact,
                                             prefix, constraints)._asdict()
      specs = [tf.TensorSpec([None, None], tf.int32)]
      specs += list(self._PREFIX_SPECS if with_prefix else ()) + list(
          self._CONSTRAINT_SPECS if with_constraints else ())
      self._searches[key] = run if self.eager else tf.function(
          run, input_signature=specs, jit_compile=self.jit_compile, autograph=False)
    return self._searches[key]

  def guided_search(self, source, prefix=None, constraints=None):
    """`search` of source ids with an optional `decoding.Prefix` and `decoding.Constraints`."""
    function = self._search_fn(prefix is not None, constraints is not None)
    return function(source, *tuple(prefix or ()), *tuple(constraints or ()))

  def _words(self, ids, token_log_probs, lengths):
    tokenizer = self.translator.target_tokenizer
    return confidence.word_tensors(tokenizer.id_to_token(ids), token_log_probs, lengths,
                                   tokenizer.joins_pieces)

  def __call__(self, text, prefix=None, constraints=None):
    """text tf.string [batch] -> dict of numpy arrays (see `Translator.translate`).
    `prefix`: optional tf.string [batch], the start of each translation ("" = none), of at
    most `Translator.max_prefix_pieces` pieces (`Translator.check_prefix`). `constraints`:
    optional tf.string [batch], the phrases each translation must contain, joined by tabs
    ("" = none; `Translator.constraints`)."""
    source, truncated = self.source_ids(text)
    result = self.guided_search(source, None if prefix is None else self.prefix(prefix),
                                None if constraints is None else self.constraints(constraints))
    result = {k: v.numpy() for k, v in result.items()}
    batch, nbest, length = result["ids"].shape
    words = self.detokenize(tf.constant(result["ids"].reshape(batch * nbest, length)))
    words = tf.reshape(words, [batch, nbest])
    if prefix is not None:
      words = self.as_typed(prefix, words)
    result["translation"] = words.numpy()
    words = self.words(result["ids"], result["token_log_probs"], result["lengths"])
    result["words"], result["word_log_probs"], result["word_count"] = (x.numpy() for x in words)
    result["source"] = source.numpy()
    result["truncated"] = truncated.numpy()
    return result


@dataclasses.dataclass
class Hypothesis:
  """One translation of a sentence.

  Attributes:
    text: detokenized translation.
    ids: target ids, EOS included.
    log_prob: log P(y | x) (EOS included), before penalties.
    score: the search's ranking score (after length/coverage penalties).
    attention: float32 [len(ids), source length + 1]: row t is the attention while
      emitting ids[t]; columns are the source tokens in reading order, then EOS.
    token_log_probs: log p(ids[t] | ids[:t], x) of each token (EOS last); their sum is
      log_prob.
    words: the translation's words, its pieces joined (`confidence.word_tensors`).
    word_log_probs: the log-probability of each word, the sum over its pieces.
  """

  text: str
  ids: List[int]
  log_prob: float
  score: float
  attention: np.ndarray
  token_log_probs: List[float] = dataclasses.field(default_factory=list)
  words: List[str] = dataclasses.field(default_factory=list)
  word_log_probs: List[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SentenceResult:
  """The translations of one input line.

  Attributes:
    index: line number (0-based).
    source: the input line.
    source_ids: source ids as read by the model, EOS last (reading order, after a cut).
    num_tokens: source tokens before the cut.
    truncated: the line had more than max_source_length tokens and was cut.
    hypotheses: up to nbest Hypothesis, best first (empty for an empty line).
  """

  index: int
  source: str
  source_ids: List[int]
  num_tokens: int
  truncated: bool
  hypotheses: List[Hypothesis]


def _token_counts(tokenizer, lines):
  counts = []
  for start in range(0, len(lines), _TOKENIZE_CHUNK):
    chunk = tf.constant(lines[start:start + _TOKENIZE_CHUNK], tf.string)
    counts.extend(tokenizer.tokenize(chunk).row_lengths().numpy().tolist())
  return counts


def translate_lines(compiled, lines, batch_size, progress: Optional[callable] = None,
                    prefixes: Optional[List[str]] = None,
                    constraints: Optional[List[List[str]]] = None):
  """Translates `lines` (python str) with a CompiledTranslator.

  Args:
    compiled: CompiledTranslator.
    lines: list of python strings.
    batch_size: sentences per search call (fewer when that many would not fit in memory,
      search_memory.py).
    progress: optional callback(num_done, num_total).
    prefixes: optional python strings, one per line: the start of each translation ("" =
      none; a prefix not ending with whitespace may have its last word completed), which the
      caller has checked with `Translator.check_prefix`. An empty line still gives no
      translation.
    constraints: optional lists of phrases, one list per line: phrases each translation
      must contain (lexically constrained beam search, also with a beam of 1), which the
      caller has checked with `Translator.check_constraints`.

  Returns:
    list of SentenceResult in the order of `lines`.

  Raises:
    ValueError: the search of one sentence with this beam would not fit in memory.
  """
  translator = compiled.translator
  lines = [line.strip() for line in lines]
  if prefixes is not None:
    if len(prefixes) != len(lines):
      raise ValueError(f"Received {len(prefixes)} prefixes for {len(lines)} sentences; "
                       "expected one per sentence (an empty string for none).")
  if constraints is not None:
    if len(constraints) != len(lines):
      raise ValueError(f"Received {len(constraints)} constraint lists for {len(lines)} "
                       "sentences; expected one per sentence (an empty list for none).")
  counts = _token_counts(translator.source_tokenizer, lines) if lines else []
  results = [SentenceResult(i, line, [special_tokens.EOS_ID], 0, False, [])
             for i, line in enumerate(lines)]
  order = sorted((i for i, line in enumerate(lines) if line), key=lambda i: counts[i])
  if order:  # the longest source, EOS included, sets the memory each sentence may need
    longest = min(counts[order[-1]], translator.max_source_length) + 1
    limit = search_memory.batch_limit(compiled.beam_size, translator.decode_config.max_length,
                                      longest, translator.target_tokenizer.vocab_size)
    batch_size = min(batch_size, limit or batch_size)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    out = compiled(tf.constant([lines[i] for i in rows], tf.string),
                   None if prefixes is None else tf.constant([prefixes[i] for i in rows],
                                                             tf.string),
                   None if constraints is None else tf.constant(
                       [CONSTRAINT_SEPARATOR.join(constraints[i]) for i in rows], tf.string))
    for b, i in enumerate(rows):
      source = [int(x) for x in out["source"][b] if x != special_tokens.PAD_ID]
      real = len(source) - 1
      hyps = []
      for k in range(out["ids"].shape[1]):
        length = int(out["lengths"][b, k])
        if length == 0:  # fewer distinct hypotheses than nbest
          continue
        attention = out["attention"][b, k, :length, :real + 1]  # [tgt_len, src_len]
        hyps.append(Hypothesis(
            text=out["translation"][b, k].decode("utf-8"),
            ids=[int(x) for x in out["ids"][b, k, :length]],
            log_prob=float(out["log_probs"][b, k]), score=float(out["scores"][b, k]),
            attention=attention,
            token_log_probs=[float(x) for x in out["token_log_probs"][b, k, :length]],
            words=[w.decode("utf-8") for w in out["words"][b, k, :out["word_count"][b, k]]],
            word_log_probs=[float(x) for x in
                            out["word_log_probs"][b, k, :out["word_count"][b, k]]]))
      results[i] = SentenceResult(i, lines[i], source, counts[i], bool(out["truncated"][b]),
                                  hyps)
    if progress is not None:
      progress(min(start + batch_size, len(order)), len(order))
  return results
