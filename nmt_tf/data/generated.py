"""A built-in, rule-based language pair: deterministic from a seed, small vocabulary.

The source side is English-like (SVO, adjectives before the noun, no agreement); the target
side is an invented language that differs in the ways attention has to handle (Bahdanau et
al., 2015, Sec. 5.2.2 on reordering):

* word order: clauses are SOV (``the dog sees a cat`` -> ``lo kano una feli vidas``),
  adjectives follow the noun, relative clauses put their object before their verb;
* agreement: determiners and adjectives carry the noun's gender and number
  (``lo/la/los/las``, ``grando/granda/grandoj/grandaj``), verbs the subject's number
  (``vidas/vidant``), in relative clauses the head noun's number;
* fertility: the plural indefinite ``some`` has no target word (``some dogs`` -> ``kanoj``);
* length: 1..``max_clauses`` coordinated clauses, nested relative clauses, up to
  ``max_length`` tokens per side.

About 90 source and 120 target words, so that a tiny model can learn the pair to near
perfect BLEU. The default corpus when no data is named (``corpus.load_corpus``).
"""

import os
import random
from typing import Dict, List, Tuple

from nmt_tf import write_path
from nmt_tf.data.errors import DataError
from nmt_tf.data.text_files import ParallelText

SOURCE_LANG, TARGET_LANG = "src", "tgt"

# source singular, source plural, target stem, gender.
_NOUNS = (
    ("dog", "dogs", "kano", "m"), ("cat", "cats", "feli", "f"),
    ("bird", "birds", "avo", "m"), ("horse", "horses", "kavalo", "m"),
    ("cow", "cows", "vaka", "f"), ("man", "men", "viro", "m"),
    ("woman", "women", "fema", "f"), ("child", "children", "infano", "m"),
    ("girl", "girls", "knabina", "f"), ("boy", "boys", "knabo", "m"),
    ("teacher", "teachers", "docento", "m"), ("doctor", "doctors", "kuracisto", "m"),
    ("queen", "queens", "regina", "f"), ("king", "kings", "rego", "m"),
    ("farmer", "farmers", "farmisto", "m"), ("mouse", "mice", "muso", "f"),
    ("fox", "foxes", "vulpo", "m"), ("lion", "lions", "leono", "m"),
    ("snake", "snakes", "serpa", "f"), ("student", "students", "studa", "f"),
)
# source, target stem (+ o / a / oj / aj for m.sg / f.sg / m.pl / f.pl).
_ADJECTIVES = (
    ("big", "grand"), ("small", "pekin"), ("red", "rub"), ("old", "antik"),
    ("young", "jun"), ("happy", "felic"), ("sad", "trist"), ("black", "negr"),
    ("white", "blank"), ("tall", "alt"), ("quick", "rapid"), ("lazy", "pigr"),
)
# source 3rd singular, source plural, target stem (+ as singular / ant plural).
_VERBS = (
    ("sees", "see", "vid"), ("likes", "like", "am"), ("follows", "follow", "sekv"),
    ("helps", "help", "help"), ("watches", "watch", "rigard"), ("finds", "find", "trov"),
    ("chases", "chase", "chas"), ("knows", "know", "kon"), ("calls", "call", "vok"),
    ("meets", "meet", "renkont"), ("feeds", "feed", "nutr"), ("hears", "hear", "aud"),
)
_DEFINITE = {("m", False): "lo", ("f", False): "la", ("m", True): "los", ("f", True): "las"}
_INDEFINITE = {("m", False): "un", ("f", False): "una"}  # plural: no target word.
_ADJ_SUFFIX = {("m", False): "o", ("f", False): "a", ("m", True): "oj", ("f", True): "aj"}

_Phrase = Tuple[List[str], List[str]]  # (source words, target words)


class _Grammar:
  """Samples one sentence pair at a time from a seeded ``random.Random``."""

  def __init__(self, rng: random.Random, max_clauses: int, relative_prob: float):
    self._rng = rng
    self._max_clauses = max_clauses
    self._relative_prob = relative_prob

  def sentence(self) -> _Phrase:
    src, tgt = self._clause()
    for _ in range(self._rng.randint(1, self._max_clauses) - 1):
      s, t = self._clause()
      src, tgt = src + ["and"] + s, tgt + ["kaj"] + t
    return src, tgt

  def _clause(self) -> _Phrase:
    subj_src, subj_tgt, plural = self._noun_phrase(depth=0)
    obj_src, obj_tgt, _ = self._noun_phrase(depth=0)
    verb_src, verb_tgt = self._verb(plural)
    return subj_src + [verb_src] + obj_src, subj_tgt + obj_tgt + [verb_tgt]  # SVO -> SOV

  def _verb(self, plural: bool) -> Tuple[str, str]:
    singular_src, plural_src, stem = self._rng.choice(_VERBS)
    return (plural_src, stem + "ant") if plural else (singular_src, stem + "as")

  def _noun_phrase(self, depth: int) -> Tuple[List[str], List[str], bool]:
    rng = self._rng
    singular_src, plural_src, stem, gender = rng.choice(_NOUNS)
    plural = rng.random() < 0.4
    definite = rng.random() < 0.6
    num_adjectives = rng.choices((0, 1, 2), weights=(0.5, 0.35, 0.15))[0]
    adjectives = rng.sample(_ADJECTIVES, num_adjectives)
    key = (gender, plural)
    if definite:
      det_src, det_tgt = ["the"], [_DEFINITE[key]]
    elif plural:
      det_src, det_tgt = ["some"], []
    else:
      det_src, det_tgt = ["a"], [_INDEFINITE[key]]
    src = det_src + [a for a, _ in adjectives] + [plural_src if plural else singular_src]
    tgt = (det_tgt + [stem + ("j" if plural else "")] +
           [a + _ADJ_SUFFIX[key] for _, a in adjectives])  # adjectives after the noun
    if depth < 2 and rng.random() < self._relative_prob / (depth + 1):
      obj_src, obj_tgt, _ = self._noun_phrase(depth + 1)
      verb_src, verb_tgt = self._verb(plural)  # agrees with the head noun
      src += ["that", verb_src] + obj_src
      tgt += ["ke"] + obj_tgt + [verb_tgt]
    return src, tgt, plural


def generate_pairs(num_pairs: int, seed: int = 0, split: str = "train",
                   max_length: int = 60, max_clauses: int = 4,
                   relative_prob: float = 0.3) -> ParallelText:
  """Samples ``num_pairs`` sentence pairs, the same ones for the same arguments.

  Args:
    num_pairs: number of pairs, >= 0.
    seed: integer seed; each split draws from its own stream ``(seed, split)``.
    split: split name, so that train/valid/test differ for one seed.
    max_length: longest sentence (tokens, either side); longer samples are redrawn.
    max_clauses: at most this many coordinated clauses per sentence (>= 1).
    relative_prob: probability of a relative clause after a top-level noun phrase.

  Returns:
    A ``ParallelText`` of space-separated sentences.
  """
  if num_pairs < 0:
    raise DataError(f"Received num_pairs={num_pairs}; expected an integer >= 0.")
  if max_length < 5:
    raise DataError(f"Received max_length={max_length}; the shortest generated sentence "
                    f"has 5 tokens, pass max_length >= 5.")
  if max_clauses < 1:
    raise DataError(f"Received max_clauses={max_clauses}; expected an integer >= 1.")
  rng = random.Random(f"nmt_tf-generated/{seed}/{split}")
  grammar = _Grammar(rng, max_clauses, relative_prob)
  sources, targets = [], []
  while len(sources) < num_pairs:
    src, tgt = grammar.sentence()
    if len(src) <= max_length and len(tgt) <= max_length:
      sources.append(" ".join(src))
      targets.append(" ".join(tgt))
  return ParallelText(sources, targets, name=f"generated/{split}")


def generate_corpus(seed: int = 0, train_size: int = 10000, valid_size: int = 500,
                    test_size: int = 500, **kwargs) -> Dict[str, ParallelText]:
  """Returns ``{"train", "valid", "test"}`` splits; ``kwargs`` go to ``generate_pairs``."""
  sizes = {"train": train_size, "valid": valid_size, "test": test_size}
  return {split: generate_pairs(n, seed=seed, split=split, **kwargs)
          for split, n in sizes.items()}


def write_corpus(directory: str, seed: int = 0, train_size: int = 10000,
                 valid_size: int = 500, test_size: int = 500,
                 **kwargs) -> Dict[str, Tuple[str, str]]:
  """Writes the generated corpus as ``<directory>/<split>.src`` and ``<split>.tgt``.

  The files can be read back with ``load_corpus("files", data_dir=directory,
  source_lang="src", target_lang="tgt")``.

  Returns:
    ``{split: (source_path, target_path)}``.
  """
  os.makedirs(directory, exist_ok=True)
  paths = {}
  corpus = generate_corpus(seed, train_size, valid_size, test_size, **kwargs)
  for split, text in corpus.items():
    paths[split] = []
    for lang, lines in ((SOURCE_LANG, text.sources), (TARGET_LANG, text.targets)):
      path = os.path.join(directory, f"{split}.{lang}")
      write_path.write_text(path, "".join(line + "\n" for line in lines))
      paths[split].append(path)
    paths[split] = tuple(paths[split])
  return paths
