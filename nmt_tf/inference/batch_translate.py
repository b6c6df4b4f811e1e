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

from nmt_tf import special_tokens
from nmt_tf.inference import search_memory

_TOKENIZE_CHUNK = 4096

# Inputs of up to this many lines are decoded eagerly (CompiledTranslator(eager=True)): the
# reference Multi30k model, 2-core AMD EPYC, first call of one to four test sentences, eager
# against traced: greedy 0.62-0.79 s against 0.86-1.14 s, beam 5 0.84-0.97 s against
# 1.47-1.75 s; eight sentences, greedy: 1.52 s against 1.26 s.
EAGER_LINES = 4


class CompiledTranslator:
  """The three compiled stages of `Translator.translate` for one beam size and nbest.

  Args:
    translator: an nmt_tf.inference.Translator.
    beam_size, nbest: python ints (None = the translator's decode config).
    jit_compile: XLA-compile the search (`tf.function(jit_compile=True)`); XLA still
      compiles once per distinct input shape, but the function is traced only once.
    eager: run the three stages op by op, untraced. Tracing the search and its first run
      take 1.1-1.7 s on a 2-core CPU; a few sentences are decoded eagerly in less
      (`EAGER_LINES`), more are faster traced.
  """

  def __init__(self, translator, beam_size=None, nbest=None, jit_compile=False, eager=False):
    self.translator = translator
    cfg = translator.decode_config
    self.beam_size = beam_size or cfg.beam_size
    self.nbest = nbest or (cfg.nbest if self.beam_size > 1 else 1)
    self.compact = False if jit_compile else None  # XLA needs static shapes
    strings = tf.TensorSpec([None], tf.string)
    ids = tf.TensorSpec([None, None], tf.int32)
    self.source_ids = tf.function(lambda text: translator.source_ids(text),
                                  input_signature=[strings], autograph=False)
    self.search = tf.function(self._search, input_signature=[ids], jit_compile=jit_compile,
                              autograph=False)
    self.detokenize = tf.function(lambda i: translator.target_tokenizer.detokenize(i),
                                  input_signature=[ids], autograph=False)
    if eager:
      self.source_ids, self.search = translator.source_ids, self._search
      self.detokenize = lambda i: translator.target_tokenizer.detokenize(i)

  def _search(self, source):
    return self.translator.translate_ids(source, self.beam_size, self.nbest,
                                         self.compact)._asdict()

  def __call__(self, text):
    """text tf.string [batch] -> dict of numpy arrays (see `Translator.translate`)."""
    source, truncated = self.source_ids(text)
    result = {k: v.numpy() for k, v in self.search(source).items()}
    batch, nbest, length = result["ids"].shape
    words = self.detokenize(tf.constant(result["ids"].reshape(batch * nbest, length)))
    result["translation"] = words.numpy().reshape(batch, nbest)
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
  """

  text: str
  ids: List[int]
  log_prob: float
  score: float
  attention: np.ndarray


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


def translate_lines(compiled, lines, batch_size, progress: Optional[callable] = None):
  """Translates `lines` (python str) with a CompiledTranslator.

  Args:
    compiled: CompiledTranslator.
    lines: list of python strings.
    batch_size: sentences per search call (fewer when that many would not fit in memory,
      search_memory.py).
    progress: optional callback(num_done, num_total).

  Returns:
    list of SentenceResult in the order of `lines`.

  Raises:
    ValueError: the search of one sentence with this beam would not fit in memory.
  """
  translator = compiled.translator
  lines = [line.strip() for line in lines]
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
    out = compiled(tf.constant([lines[i] for i in rows], tf.string))
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
            attention=attention))
      results[i] = SentenceResult(i, lines[i], source, counts[i], bool(out["truncated"][b]),
                                  hyps)
    if progress is not None:
      progress(min(start + batch_size, len(order)), len(order))
  return results
