"""Source/target tokenizer pairs: the config, training on a split, run-directory files.

A run directory holds ``tokenizers.json`` (which prefix each side uses) and the files of
``Tokenizer.save``: ``source.*`` and ``target.*``, or a single ``shared.*`` when both sides
share one vocabulary (Sennrich et al., 2016 "joint BPE").
"""

import collections
import dataclasses
import os
from typing import Any, Iterator, Mapping, Optional, Sequence, Tuple

from nmt_tf import write_path
from nmt_tf.data.errors import DataError
from nmt_tf.data.sentencepiece_tokenizer import MODEL_TYPES, SentencePieceTokenizer
from nmt_tf.data.shards import ParallelShards, sample_indices, sample_pairs
from nmt_tf.data.text_files import ParallelText
from nmt_tf.data.tokenizer import read_json_file, Tokenizer
from nmt_tf.data.word_tokenizer import count_words, WordTokenizer

MANIFEST = "tokenizers.json"
KINDS = ("sentencepiece", "word")


@dataclasses.dataclass
class TokenizerConfig:
  """How to build the tokenizers.

  Attributes:
    kind: "sentencepiece" (subwords) or "word" (word vocabulary with UNK).
    vocab_size: pieces (SentencePiece, a soft limit) or words (the cap), including the 4
      reserved tokens.
    model_type: SentencePiece "unigram" or "bpe".
    shared: one vocabulary trained on both sides, used for both.
    split_punctuation: word tokenizer: split punctuation marks off words.
    min_count: word tokenizer: minimum frequency of a kept word.
    character_coverage: SentencePiece character coverage.
    max_sentences: at most this many pairs are used for training: a larger training split
      gives a uniform sample of that many pairs (the same for both sides), read in one pass.
    sample_seed: seed of that sample.
  """
  kind: str = "sentencepiece"
  vocab_size: int = 8000
  model_type: str = "unigram"
  shared: bool = False
  split_punctuation: bool = True
  min_count: int = 1
  character_coverage: float = 1.0
  max_sentences: int = 1_000_000
  sample_seed: int = 0

  def __post_init__(self):
    if self.kind not in KINDS:
      raise DataError(f"Received tokenizer kind={self.kind!r}; expected one of {KINDS}.")
    if self.model_type not in MODEL_TYPES:
      raise DataError(f"Received model_type={self.model_type!r}; expected one of "
                      f"{MODEL_TYPES}.")
    if self.vocab_size <= 4:
      raise DataError(f"Received vocab_size={self.vocab_size}; expected an integer > 4.")

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "TokenizerConfig":
    """Builds a config, rejecting unknown keys."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise DataError(f"Unknown tokenizer config keys {unknown}; expected some of "
                      f"{sorted(known)}.")
    return cls(**values)


def sample_texts(split, limit: Optional[int] = None,
                 seed: int = 0) -> Iterator[Tuple[str, str]]:
  """``(source, target)`` pairs of a split to build vocabularies from: every pair, or, when
  the split has more than ``limit``, a seeded uniform sample of ``limit`` of them (in corpus
  order; for a streamed split, of ``limit`` lines, read in one pass without holding the
  corpus). A ``tf.data.Dataset`` gives its first ``limit`` pairs."""
  if isinstance(split, ParallelText):
    chosen = sample_indices(len(split), limit, seed)
    indices = range(len(split)) if chosen is None else chosen
    return ((split.sources[i], split.targets[i]) for i in indices)
  if isinstance(split, ParallelShards):
    return sample_pairs(split, limit, seed)
  ds = split.take(limit) if limit else split
  return ((s.decode("utf-8"), t.decode("utf-8")) for s, t in ds.as_numpy_iterator())


def train_tokenizers(config: TokenizerConfig, train_split,
                     symbols: Sequence[str] = ()) -> Tuple[Tokenizer, Tokenizer]:
  """Trains the source and target tokenizers on the training split (at most
  ``config.max_sentences`` pairs of it, ``sample_texts``, read once).

  Word vocabularies are counted while the pairs stream by; SentencePiece gets the sentences
  as lists (it keeps its input in memory anyway).

  Args:
    config: what to train.
    train_split: ``ParallelText``, ``ParallelShards`` or ``tf.data.Dataset`` of ``(source,
      target)``.

    symbols: source tokens kept whole and always in the vocabulary (the target-language
      tags of ``target_tags.py``).

  Returns:
    ``(source_tokenizer, target_tokenizer)``; the same object twice when shared.
  """
  pairs = sample_texts(train_split, config.max_sentences, config.sample_seed)
  if config.kind == "word":
    source_counts = collections.Counter()
    target_counts = source_counts if config.shared else collections.Counter()
    for source, target in pairs:
      count_words(source_counts, (source,), config.split_punctuation)
      count_words(target_counts, (target,), config.split_punctuation)
    for symbol in symbols:  # before every word: kept whatever the cap
      source_counts[symbol] = float("inf")
    build = lambda counts: WordTokenizer.from_counts(  # pylint: disable=g-long-lambda
        counts, config.vocab_size, config.min_count, config.split_punctuation)
    if config.shared:
      shared = build(source_counts)
      return shared, shared
    return build(source_counts), build(target_counts)
  sources, targets = [], []
  for source, target in pairs:
    sources.append(source)
    targets.append(target)
  # SentencePiece reads at most max_sentences of its input and samples a larger input without
  # a seed: it gets at least as many as the sample holds, so it trains on all of them.
  train = lambda texts, symbols=(): SentencePieceTokenizer.train(  # pylint: disable=g-long-lambda
      texts, config.vocab_size, config.model_type,
      character_coverage=config.character_coverage,
      max_sentences=max(config.max_sentences, len(texts)), symbols=symbols)
  if config.shared:
    shared = train(sources + targets, symbols)
    return shared, shared
  return train(sources, symbols), train(targets)


def save_tokenizers(directory: str, source: Tokenizer, target: Tokenizer) -> None:
  """Writes both tokenizers and ``tokenizers.json`` into ``directory``."""
  os.makedirs(directory, exist_ok=True)
  if source is target:
    source.save(directory, "shared")
    prefixes = {"source": "shared", "target": "shared"}
  else:
    source.save(directory, "source")
    target.save(directory, "target")
    prefixes = {"source": "source", "target": "target"}
  write_path.write_json(os.path.join(directory, MANIFEST), prefixes)


# What to do about a damaged file of a run's vocab/ directory.
DAMAGED_FIX = ("restore it from a backup or retrain the tokenizers in a new --run_dir (the "
               "run's checkpoints need these vocabularies)")


def load_tokenizers(directory: str) -> Tuple[Tokenizer, Tokenizer]:
  """Reads what ``save_tokenizers`` wrote; a shared vocabulary is one object twice.

  Raises:
    DataError: one line naming the missing, empty or corrupt file (``tokenizers.json``, a
      ``<prefix>.json`` or the SentencePiece model / word vocabulary it names) and the fix.
  """
  path = os.path.join(directory, MANIFEST)
  if not os.path.isfile(path):
    raise DataError(f"No {MANIFEST} in {directory!r}; train the tokenizers for this run "
                    f"first (load_or_train_tokenizers) or pass the run directory.")
  prefixes = read_json_file(path, DAMAGED_FIX)
  if not all(isinstance(prefixes.get(side), str) and prefixes[side]
             for side in ("source", "target")):
    raise DataError(f"{path} does not name the source and target tokenizers (expected "
                    f'{{"source": PREFIX, "target": PREFIX}}, received {prefixes}); '
                    f"{DAMAGED_FIX}.")
  source = Tokenizer.load(directory, prefixes["source"], DAMAGED_FIX)
  if prefixes["target"] == prefixes["source"]:
    return source, source
  return source, Tokenizer.load(directory, prefixes["target"], DAMAGED_FIX)


def load_or_train_tokenizers(directory: str, config: TokenizerConfig, train_split,
                             symbols: Sequence[str] = ()) -> Tuple[Tokenizer, Tokenizer]:
  """Loads the run's tokenizers, or trains them on ``train_split`` (with the source
  ``symbols`` of ``train_tokenizers``) and saves them."""
  if os.path.isfile(os.path.join(directory, MANIFEST)):
    return load_tokenizers(directory)
  source, target = train_tokenizers(config, train_split, symbols)
  save_tokenizers(directory, source, target)
  return source, target
