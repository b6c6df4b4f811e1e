"""Multi30k task 1 (Elliott et al., 2016): image captions in English, German and French.

Two ways in, reading the same files:

* ``load_multi30k(pair)``: reads the local gzipped files directly (fast, no TFDS);
* ``Multi30k`` (``multi30k_tfds.py``, imported on first use: TensorFlow Datasets takes
  0.1 s to import): a ``tfds.core.GeneratorBasedBuilder`` with one config per language pair
  (``de-en``, ``fr-en``, ``de-fr``) that reads the local copy when there is one and
  downloads the public GitHub files otherwise.

The local copy is ``{train,val,test_2016_flickr}.{de,en,fr}.gz`` (29,000 / 1,014 / 1,000
lines) in the directory given by the ``NMT_TF_MULTI30K_DIR`` environment variable or the
caller, else ``<repo root>/../shared/data/multi30k`` when it exists.
"""

import os
from typing import Dict, Optional, Tuple, Union

from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import open_text_shards, ParallelShards
from nmt_tf.data.text_files import ParallelText, read_parallel, split_files

ENV_VAR = "NMT_TF_MULTI30K_DIR"
LANGUAGES = ("de", "en", "fr")
# Our split name -> file prefix of Multi30k task 1.
SPLIT_PREFIXES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
SPLIT_SIZES = {"train": 29000, "valid": 1014, "test": 1000}
URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{}.{}.gz"
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_dir() -> Optional[str]:
  """The local Multi30k directory: ``$NMT_TF_MULTI30K_DIR``, else the shared copy.

  Returns:
    An existing directory path, or None when there is no local copy.
  """
  env = os.environ.get(ENV_VAR)
  if env:
    return env
  shared = os.path.normpath(os.path.join(_REPO_ROOT, "..", "shared", "data", "multi30k"))
  return shared if os.path.isdir(shared) else None


def parse_pair(pair: str) -> Tuple[str, str]:
  """``"de-en"`` -> ``("de", "en")``, checking both are Multi30k languages."""
  langs = tuple(pair.split("-"))
  if len(langs) != 2 or langs[0] == langs[1] or not set(langs) <= set(LANGUAGES):
    raise DataError(f"Received Multi30k language pair {pair!r}; expected "
                    f"'<src>-<tgt>' with two different languages of {LANGUAGES}, "
                    f"e.g. 'de-en'.")
  return langs  # type: ignore[return-value]


def load_multi30k(pair: str = "de-en",
                  data_dir: Optional[str] = None
                  ) -> Dict[str, Union[ParallelText, ParallelShards]]:
  """Reads Multi30k task 1 from a local directory.

  Args:
    pair: ``"<source>-<target>"``, e.g. ``"de-en"`` or ``"en-fr"``.
    data_dir: directory with the ``.gz`` files; defaults to ``default_dir()``.

  Returns:
    ``{"train": ParallelShards, "valid", "test": ParallelText}`` (the train split is
    streamed, ``shards.py``).

  Raises:
    DataError: no local copy, or a missing or bad file.
  """
  source_lang, target_lang = parse_pair(pair)
  data_dir = data_dir or default_dir()
  if not data_dir or not os.path.isdir(data_dir):
    raise DataError(
        f"Multi30k directory not found (received {data_dir!r}); set ${ENV_VAR} or pass "
        f"data_dir to a directory with {{train,val,test_2016_flickr}}.{{de,en,fr}}.gz, or "
        f"use the Multi30k TFDS builder, which downloads them.")
  corpus = {}
  for split, prefix in SPLIT_PREFIXES.items():
    src, tgt = split_files(data_dir, prefix, source_lang, target_lang)
    name = f"multi30k/{pair}/{split}"
    corpus[split] = (open_text_shards([src], [tgt], name=name) if split == "train" else
                     read_parallel(src, tgt, name=name))
  return corpus
