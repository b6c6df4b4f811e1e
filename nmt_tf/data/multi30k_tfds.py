"""The TensorFlow Datasets builder of Multi30k task 1 (``multi30k.py`` reads the files
directly): one config per language pair, the local copy when there is one, else the public
GitHub files."""

import os
from typing import Optional, Tuple

from etils import epath
import tensorflow_datasets as tfds

from nmt_tf.data import multi30k
from nmt_tf.data.text_files import read_parallel


class Multi30kConfig(tfds.core.BuilderConfig):
  """One language pair; examples hold both languages, the caller picks the direction."""

  def __init__(self, *, languages: Tuple[str, str], **kwargs):
    super().__init__(name="-".join(languages),
                     description=f"Multi30k task 1, {languages[0]} and {languages[1]}.",
                     **kwargs)
    self.languages = languages


class Multi30k(tfds.core.GeneratorBasedBuilder):
  """TFDS builder for Multi30k task 1: splits train / validation / test (test_2016_flickr).

  Reads ``local_dir`` (default ``multi30k.default_dir()``) when it holds the files, downloads the
  public GitHub raw files otherwise. Examples: ``{lang1: text, lang2: text}``.
  """

  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [Multi30kConfig(languages=("de", "en")),
                     Multi30kConfig(languages=("fr", "en")),
                     Multi30kConfig(languages=("de", "fr"))]

  def __init__(self, *, local_dir: Optional[str] = None, **kwargs):
    self._local_dir = local_dir or multi30k.default_dir()
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
    for split, prefix in multi30k.SPLIT_PREFIXES.items():
      local = [os.path.join(self._local_dir or "", f"{prefix}.{lang}.gz") for lang in langs]
      if self._local_dir and all(os.path.isfile(p) for p in local):
        files[split] = local  # the local copy wins: no network in tests and CI
      else:
        files[split] = [dl_manager.download(multi30k.URL.format(prefix, lang)) for lang in langs]
    return {tfds_split[s]: self._generate_examples(paths) for s, paths in files.items()}

  def _generate_examples(self, paths):
    langs = self.builder_config.languages
    text = read_parallel(os.fspath(paths[0]), os.fspath(paths[1]))
    for i, (a, b) in enumerate(zip(text.sources, text.targets)):
      yield i, {langs[0]: a, langs[1]: b}
