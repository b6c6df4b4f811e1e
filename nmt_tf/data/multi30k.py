"""Multi30k task 1 (Elliott et al., 2016): image captions in English, German and French.

Two ways in, reading the same files:

* ``load_multi30k(pair)``: reads the local gzipped files directly (fast, no TFDS);
* ``Multi30k``: a ``tfds.core.GeneratorBasedBuilder`` with one config per language pair
  (``de-en``, ``fr-en``, ``de-fr``) that reads the local copy when there is one and
  downloads the public GitHub files otherwise.

The local copy is ``{train,val,test_2016_flickr}.{de,en,fr}.gz`` (29,000 / 1,014 / 1,000
lines) in the directory given by the ``NMT_TF_MULTI30K_DIR`` environment variable or the
caller, else ``<repo root>/../shared/data/multi30k`` when it exists.
"""

import os
from typing import Dict, Optional, Tuple, Union

from etils import epath
import tensorflow_datasets as tfds

from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import open_text_shards, ParallelShards
from nmt_tf.data.text_files import ParallelText, read_parallel, split_files

ENV_VAR = "NMT_TF_MULTI30K_DIR"
LANGUAGES = ("de", "en", "fr")
# Our split name -> file prefix of Multi30k task 1.
SPLIT_PREFIXES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
SPLIT_SIZES = {"train": 29000, "valid": 1014, "test": 1000}
_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{}.{}.gz"
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


class Multi30kConfig(tfds.core.BuilderConfig):
  """One language pair; examples hold both languages, the caller picks the direction."""

  def __init__(self, *, languages: Tuple[str, str], **kwargs):
    super().__init__(name="-".join(languages),
                     description=f"Multi30k task 1, {languages[0]} and {languages[1]}.",
                     **kwargs)
    self.languages = languages


class Multi30k(tfds.core.GeneratorBasedBuilder):
  """TFDS builder for Multi30k task 1: splits train / validation / test (test_2016_flickr).

  Reads ``local_dir`` (default ``default_dir()``) when it holds the files, downloads the
  public GitHub raw files otherwise. Examples: ``{lang1: text, lang2: text}``.
  """

  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [Multi30kConfig(languages=("de", "en")),
                     Multi30kConfig(languages=("fr", "en")),
                     Multi30kConfig(languages=("de", "fr"))]

  def __init__(self, *, local_dir: Optional[str] = None, **kwargs):
    self._local_dir = local_dir or default_dir()
    super().__init__(**kwargs)

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    # TFDS's default looks the path up with `importlib_resources`, a package TFDS imports
    # but does not declare; this file is the answer anyway.
    return epath.Path(__file__)

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description="Multi30k task 1 image caption translations (Elliott et al., 2016).",
        features=tfds.features.Translation(languages=self.builder_config.languages),
        supervised_keys=self.builder_config.languages,
        homepage="https://github.com/multi30k/dataset",
    )

  def _split_generators(self, dl_manager):
    langs = self.builder_config.languages
    tfds_split = {"train": "train", "valid": "validation", "test": "test"}
    files = {}
    for split, prefix in SPLIT_PREFIXES.items():
      local = [os.path.join(self._local_dir or "", f"{prefix}.{lang}.gz") for lang in langs]
      if self._local_dir and all(os.path.isfile(p) for p in local):
        files[split] = local  # the local copy wins: no network in tests and CI
      else:
        files[split] = [dl_manager.download(_URL.format(prefix, lang)) for lang in langs]
    return {tfds_split[s]: self._generate_examples(paths) for s, paths in files.items()}

  def _generate_examples(self, paths):
    langs = self.builder_config.languages
    text = read_parallel(os.fspath(paths[0]), os.fspath(paths[1]))
    for i, (a, b) in enumerate(zip(text.sources, text.targets)):
      yield i, {langs[0]: a, langs[1]: b}
