"""Any TFDS translation dataset by name, e.g. ``wmt14_translate/fr-en``.

TFDS translation datasets yield ``{lang_a: text, lang_b: text}``; the config name (``fr-en``)
says which languages are there, the caller says which one is the source. Splits are mapped
to ours: ``train`` -> train, ``validation`` -> valid, ``test`` -> test. Needs the network
the first time (or a prepared ``data_dir``); the tests only check this plumbing.
"""

from typing import Dict, Optional, Tuple

import tensorflow as tf
import tensorflow_datasets as tfds

from nmt_tf.data.errors import DataError

# Our split name -> TFDS split name.
DEFAULT_SPLITS = {"train": "train", "valid": "validation", "test": "test"}


def parse_tfds_name(name: str, source_lang: Optional[str] = None,
                    target_lang: Optional[str] = None) -> Tuple[str, str, str]:
  """Resolves a TFDS name and the translation direction.

  Args:
    name: ``"<dataset>/<lang>-<lang>"`` (e.g. ``"wmt14_translate/fr-en"``), optionally with
      a version (``"wmt14_translate/fr-en:1.0.0"``), or ``"<dataset>"`` when both
      languages are given.
    source_lang: source language; defaults to the first language of the config name.
    target_lang: target language; defaults to the other one.

  Returns:
    ``(name, source_lang, target_lang)``.

  Raises:
    DataError: the languages cannot be worked out, or are not the config's.
  """
  config = name.split("/", 1)[1].split(":")[0] if "/" in name else ""
  langs = tuple(config.split("-")) if config.count("-") == 1 else ()
  if langs:
    source_lang = source_lang or (langs[1] if target_lang == langs[0] else langs[0])
    target_lang = target_lang or (langs[1] if source_lang == langs[0] else langs[0])
    if {source_lang, target_lang} != set(langs):
      raise DataError(
          f"TFDS dataset {name!r} has languages {langs}, received source_lang="
          f"{source_lang!r}, target_lang={target_lang!r}; pass one of them each.")
  elif not (source_lang and target_lang):
    raise DataError(
        f"Cannot tell the languages of TFDS dataset {name!r}; name a '<src>-<tgt>' config "
        f"(e.g. 'wmt14_translate/fr-en') or pass source_lang and target_lang.")
  return name, source_lang, target_lang


def load_tfds_translation(name: str, source_lang: Optional[str] = None,
                          target_lang: Optional[str] = None,
                          data_dir: Optional[str] = None, download: bool = True,
                          splits: Optional[Dict[str, str]] = None
                          ) -> Dict[str, tf.data.Dataset]:
  """Loads a TFDS translation dataset as ``(source, target)`` string datasets.

  Args:
    name: TFDS name, see ``parse_tfds_name``.
    source_lang: source language key of the examples.
    target_lang: target language key.
    data_dir: TFDS data directory (default: TFDS's own, ``~/tensorflow_datasets``).
    download: whether TFDS may download and prepare the data.
    splits: our split name -> TFDS split name; default ``DEFAULT_SPLITS``.

  Returns:
    ``{split: tf.data.Dataset}`` of scalar ``(source, target)`` tf.string pairs, in file
    order, pairs with an empty side dropped.
  """
  name, source_lang, target_lang = parse_tfds_name(name, source_lang, target_lang)
  corpus = {}
  for split, tfds_split in (splits or DEFAULT_SPLITS).items():
    ds = tfds.load(name, split=tfds_split, data_dir=data_dir, download=download,
                   shuffle_files=False)
    corpus[split] = select_languages(ds, source_lang, target_lang)
  return corpus


def select_languages(ds: tf.data.Dataset, source_lang: str,
                     target_lang: str) -> tf.data.Dataset:
  """``{lang: text}`` examples -> ``(source, target)`` pairs with two non-empty sides."""
  pairs = ds.map(lambda ex: (tf.strings.strip(ex[source_lang]),
                             tf.strings.strip(ex[target_lang])))
  return pairs.filter(lambda s, t: tf.logical_and(tf.strings.length(s) > 0,
                                                  tf.strings.length(t) > 0))
