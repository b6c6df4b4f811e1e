"""One entry point for every corpus source, selected by ``CorpusConfig.name``.

=================================  ====================================================
``name``                           source
=================================  ====================================================
``"generated"`` (default)          the built-in rule-based pair (``generated.py``)
``"files"``                        line-aligned plain/gzipped files: explicit
                                   ``train_src``/``train_tgt``/... paths (the train
                                   files may be glob patterns or comma-separated
                                   lists: shards), or ``data_dir/<prefix>.<lang>[.gz]``
``"multi30k"``, ``"multi30k/de-en"``  Multi30k task 1, local copy (``multi30k.py``);
                                   ``use_tfds=True`` goes through the TFDS builder
``"tfds:<dataset>/<config>"``      any TFDS translation dataset (``tfds_source.py``)
``"shapes"``, ``"captions"``        images and captions, for caption generation: loaded
                                   by ``captions.py``, not here
=================================  ====================================================

Every source returns ``{"train", "valid", "test"}`` (those that exist) mapping to a
``ParallelText`` (python lists), a ``ParallelShards`` (streamed from files or TFDS record
files, ``shards.py``: the train split of files, Multi30k and TFDS) or a ``tf.data.Dataset``
of scalar ``(source, target)`` strings (TFDS valid/test); ``pipeline.py`` takes all three.
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Optional, Union

from absl import logging
import tensorflow as tf

from nmt_tf.data import generated
from nmt_tf.data import multi30k
from nmt_tf.data import target_tags
from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import expand_paths, open_text_shards, ParallelShards
from nmt_tf.data.text_files import ParallelText, read_parallel, split_files
from nmt_tf.data.tokenizer_pair import sample_texts

SPLITS = ("train", "valid", "test")
Split = Union[ParallelText, ParallelShards, tf.data.Dataset]


@dataclasses.dataclass
class CorpusConfig:
  """Which corpus to load; fields not used by the chosen source are ignored.

  Attributes:
    name: source, see the module docstring.
    source_lang: source language (files in a directory, Multi30k, TFDS).
    target_lang: target language.
    data_dir: ``files``: corpus directory; ``multi30k``: local copy (default
      ``$NMT_TF_MULTI30K_DIR`` or the shared copy); ``tfds:``: TFDS data_dir;
      ``captions``: the image folder; ``shapes``: where its images are written (default:
      the run directory's ``shapes``).
    train_src, train_tgt, valid_src, valid_tgt, test_src, test_tgt: explicit file paths
      (``files``); valid/test are optional. Each may be a glob pattern (sorted) or
      comma-separated paths: the train files are then shards, file i of one side aligned
      with file i of the other; valid/test files are read one after the other.
    train_prefix, valid_prefix, test_prefix: file prefixes in ``data_dir`` (``files``).
    seed, train_size, valid_size, test_size, max_length: the generated pair (the sizes and
      seed: also the shapes set, in images).
    train_tgt, valid_tgt, test_tgt with ``captions``: the ``image<TAB>caption`` files
      (default ``data_dir/<prefix>.tsv``).
    use_tfds: ``multi30k`` through the TFDS builder (prepared in ``tfds_data_dir``).
    tfds_data_dir: TFDS data directory for the Multi30k builder.
    train_sample: train on a seeded uniform sample of this many pairs of the training
      split (every source but the generated pair; held in memory, in corpus order): a
      low-resource corpus cut from a larger one. None: every pair.
    train_sample_seed: the seed of that sample.
    pairs: several language pairs of the source, "de-en,de-fr" (Multi30k, files in
      data_dir, TFDS), in place of source_lang and target_lang: each split holds the pairs
      one after the other (in memory). See ``target_tags.py``.
    target_tags: start every source with the tag of its target language, "<2fr>", so
      that one model translates into several languages (needed when ``pairs`` has
      several target languages).
  """
  name: str = "generated"
  source_lang: Optional[str] = None
  target_lang: Optional[str] = None
  data_dir: Optional[str] = None
  train_src: Optional[str] = None
  train_tgt: Optional[str] = None
  valid_src: Optional[str] = None
  valid_tgt: Optional[str] = None
  test_src: Optional[str] = None
  test_tgt: Optional[str] = None
  train_prefix: str = "train"
  valid_prefix: str = "valid"
  test_prefix: str = "test"
  seed: int = 0
  train_size: int = 10000
  valid_size: int = 500
  test_size: int = 500
  max_length: int = 60
  use_tfds: bool = False
  tfds_data_dir: Optional[str] = None
  train_sample: Optional[int] = None
  train_sample_seed: int = 0
  pairs: Optional[str] = None
  target_tags: bool = False

  def __post_init__(self):
    if self.pairs is not None:
      try:
        targets = {target for _, target in target_tags.parse_pairs(self.pairs)}
      except ValueError as error:
        raise DataError(str(error)) from None
      if len(targets) > 1 and not self.target_tags:
        raise DataError(f"data.pairs={self.pairs!r} has {len(targets)} target languages; "
                        "set data.target_tags=True so that the model is told which to "
                        "produce.")
    if self.train_sample is not None and (not isinstance(self.train_sample, int)
                                          or self.train_sample <= 0):
      raise DataError(f"Received train_sample={self.train_sample!r}; expected a positive "
                      "number of pairs, or None for every pair.")

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "CorpusConfig":
    """Builds a config, rejecting unknown keys (a typo is an error, not a default)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise DataError(f"Unknown corpus config keys {unknown}; expected some of "
                      f"{sorted(known)}.")
    return cls(**values)


def load_corpus(config: Union[CorpusConfig, str, None] = None,
                **overrides) -> Dict[str, Split]:
  """Loads the splits of the corpus a config (or just a name) selects.

  Args:
    config: a ``CorpusConfig``, a name (``"multi30k/de-en"``), or None for the generated
      pair.
    **overrides: ``CorpusConfig`` fields replacing those of ``config``.

  Returns:
    ``{split: ParallelText | ParallelShards | tf.data.Dataset}`` for the splits that exist
    ("train" always).

  Raises:
    DataError: unknown source, or bad files (see ``text_files.py``).
  """
  if config is None or isinstance(config, str):
    config = CorpusConfig(name=config or "generated")
  config = CorpusConfig.from_dict({**dataclasses.asdict(config), **overrides})
  corpus = _load_pairs(config) if config.pairs else _tagged(_load(config), config)
  if config.train_sample and config.name != "generated":
    corpus["train"] = _in_memory(corpus["train"], config.train_sample,
                                 config.train_sample_seed)
  return corpus


def pair_corpora(config: CorpusConfig) -> Dict[str, Dict[str, Split]]:
  """{"de-en": splits, ...}: each pair of ``config.pairs`` (or its one pair) loaded alone,
  its sources tagged as the model reads them, for a report of each pair."""
  if not config.pairs:
    return {f"{config.source_lang}-{config.target_lang}": _tagged(_load(config), config)}
  return {f"{source}-{target}": _tagged(_load(dataclasses.replace(
              config, source_lang=source, target_lang=target, pairs=None)), config, target)
          for source, target in target_tags.parse_pairs(config.pairs)}


def _load_pairs(config: CorpusConfig) -> Dict[str, Split]:
  """The splits of every pair of ``config.pairs``, one after the other (ParallelText)."""
  corpus = {}
  for splits in pair_corpora(config).values():
    for split, part in splits.items():
      merged = corpus.setdefault(split, ParallelText(
          [], [], name=f"{config.name}/{split} ({config.pairs})"))
      part = _in_memory(part)
      merged.sources.extend(part.sources)
      merged.targets.extend(part.targets)
  return corpus


def _tagged(corpus: Dict[str, Split], config: CorpusConfig,
            target_lang: Optional[str] = None) -> Dict[str, Split]:
  """``corpus`` with the tag of ``target_lang`` (default config.target_lang) before each
  source when ``config.target_tags`` (in memory, ParallelText); as it is otherwise."""
  if not config.target_tags:
    return corpus
  language = target_lang or config.target_lang
  if not language:
    raise DataError("data.target_tags=True needs the target language: set "
                    "data.target_lang, or data.pairs.")
  return {split: _in_memory(part, tag=lambda source: target_tags.tagged(source, language))
          for split, part in corpus.items()}


def _in_memory(split: Split, size: Optional[int] = None, seed: int = 0,
               tag=lambda source: source) -> ParallelText:
  """``split`` as a ParallelText: every pair, or a seeded uniform sample of ``size`` pairs
  (``sample_texts``, in corpus order), each source passed through ``tag``."""
  pairs = list(sample_texts(split, size, seed))
  name = getattr(split, "name", "") or "train"
  if size:
    name = f"{name} (a sample of {len(pairs):,} pairs)"
  return ParallelText([tag(s) for s, _ in pairs], [t for _, t in pairs], name)


def _load(config: CorpusConfig) -> Dict[str, Split]:
  """The splits of ``config``'s source."""
  name = config.name
  if name == "generated":
    return generated.generate_corpus(config.seed, config.train_size, config.valid_size,
                                     config.test_size, max_length=config.max_length)
  if name == "files":
    return _load_files(config)
  if name == "multi30k" or name.startswith("multi30k/"):
    return _load_multi30k(config)
  if name.startswith("tfds:"):
    from nmt_tf.data import tfds_source  # pylint: disable=g-import-not-at-top (0.1 s)
    return tfds_source.load_tfds_translation(name[len("tfds:"):], config.source_lang,
                                             config.target_lang, config.data_dir)
  if name in ("shapes", "captions"):
    raise DataError(f"data.name={name!r} holds images and captions; load it with "
                    "nmt_tf.data.captions.load_captions (model.encoder='image').")
  raise DataError(f"Unknown corpus name {name!r}; expected 'generated', 'files', "
                  f"'multi30k[/<src>-<tgt>]' or 'tfds:<dataset>/<config>'.")


def _load_files(config: CorpusConfig) -> Dict[str, Split]:
  explicit = {"train": (config.train_src, config.train_tgt),
              "valid": (config.valid_src, config.valid_tgt),
              "test": (config.test_src, config.test_tgt)}
  if config.train_src or config.train_tgt:
    if not (config.train_src and config.train_tgt):
      raise DataError(f"Received train_src={config.train_src!r}, train_tgt="
                      f"{config.train_tgt!r}; pass both files of the pair.")
    paths = {split: p for split, p in explicit.items() if p[0] or p[1]}
    for split, (src, tgt) in paths.items():
      if not (src and tgt):
        raise DataError(f"Received {split}_src={src!r}, {split}_tgt={tgt!r}; pass both "
                        f"files of the pair or neither.")
  elif config.data_dir:
    if not (config.source_lang and config.target_lang):
      raise DataError(f"Corpus 'files' with data_dir={config.data_dir!r} needs "
                      f"source_lang and target_lang (files <prefix>.<lang>[.gz]).")
    prefixes = {"train": config.train_prefix, "valid": config.valid_prefix,
                "test": config.test_prefix}
    paths = {}
    for split, prefix in prefixes.items():
      pair = split_files(config.data_dir, prefix, config.source_lang, config.target_lang)
      if split == "train" or os.path.exists(pair[0]) or os.path.exists(pair[1]):
        paths[split] = pair
      else:
        logging.info("No %s split in %s (no %s).", split, config.data_dir, pair[0])
  else:
    raise DataError("Corpus 'files' needs train_src and train_tgt, or data_dir with "
                    "source_lang and target_lang.")
  corpus = {}
  for split, (src, tgt) in paths.items():
    sources, targets = expand_paths(src, f"{split} source"), expand_paths(tgt, f"{split} target")
    if split == "train":
      corpus[split] = open_text_shards(sources, targets, name=f"files/{split}")
    elif len(sources) != len(targets):
      raise DataError(f"Received {len(sources)} {split} source and {len(targets)} target "
                      f"files; pass the same number of each.")
    else:
      parts = [read_parallel(s, t, name=f"files/{split}") for s, t in zip(sources, targets)]
      corpus[split] = ParallelText([x for p in parts for x in p.sources],
                                   [x for p in parts for x in p.targets], name=f"files/{split}",
                                   paths=tuple(f for p in parts for f in p.paths))
  return corpus


def _load_multi30k(config: CorpusConfig) -> Dict[str, Split]:
  pair = config.name.split("/", 1)[1] if "/" in config.name else (
      f"{config.source_lang or 'de'}-{config.target_lang or 'en'}")
  source_lang, target_lang = multi30k.parse_pair(pair)
  if not config.use_tfds:
    return multi30k.load_multi30k(pair, config.data_dir)
  # pylint: disable-next=g-import-not-at-top (TensorFlow Datasets takes 0.1 s to import)
  from nmt_tf.data import multi30k_tfds, tfds_source
  config_name = next(c.name for c in multi30k_tfds.Multi30k.BUILDER_CONFIGS
                     if set(c.languages) == {source_lang, target_lang})
  builder = multi30k_tfds.Multi30k(config=config_name, data_dir=config.tfds_data_dir,
                                   local_dir=config.data_dir)
  builder.download_and_prepare()
  corpus = {}
  for split, tfds_split in tfds_source.DEFAULT_SPLITS.items():
    ds = builder.as_dataset(split=tfds_split, shuffle_files=False)
    corpus[split] = (tfds_source.train_shards(builder, tfds_split, ds, source_lang,
                                              target_lang) if split == "train" else
                     tfds_source.select_languages(ds, source_lang, target_lang))
  return corpus
