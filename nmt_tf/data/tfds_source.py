"""Any TFDS translation dataset by name, e.g. ``wmt14_translate/fr-en``.

TFDS translation datasets yield ``{lang_a: text, lang_b: text}``; the config name (``fr-en``)
says which languages are there, the caller says which one is the source. Splits are mapped
to ours: ``train`` -> train, ``validation`` -> valid, ``test`` -> test. Needs the network
the first time (or a prepared ``data_dir``).

The train split is a ``ParallelShards`` (``shards.py``), streamed like text files: one shard
per TFDS record file of the prepared dataset (read with ``TFRecordDataset``, so skipping to a
piece reads records without decoding them, and workers split the files), or, when the
dataset has no such files, one shard over the ``tfds.load`` dataset.
"""

import contextlib
from typing import Dict, Optional, Tuple, Union

from absl import logging
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core.download import downloader as tfds_downloader

from nmt_tf.data.errors import DataError
from nmt_tf.data.shards import ParallelShards, Shard

# Our split name -> TFDS split name.
DEFAULT_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
# HTTP retries of a TFDS download (TFDS's own default is 10, with exponential backoff).
DOWNLOAD_RETRIES = 3


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
    order, pairs with an empty side dropped; ``train`` is a ``ParallelShards`` of the same
    pairs.
  """
  name, source_lang, target_lang = parse_tfds_name(name, source_lang, target_lang)
  prepare(name, data_dir, download)
  corpus = {}
  for split, tfds_split in (splits or DEFAULT_SPLITS).items():
    ds = tfds.load(name, split=tfds_split, data_dir=data_dir, download=False,
                   shuffle_files=False)
    if split == "train":
      corpus[split] = train_shards(name, tfds_split, ds, source_lang, target_lang, data_dir)
    else:
      corpus[split] = select_languages(ds, source_lang, target_lang)
  return corpus


def prepare(name: str, data_dir: Optional[str] = None, download: bool = True) -> None:
  """Makes sure TFDS dataset `name` is prepared in `data_dir`, downloading it if allowed.

  Raises:
    DataError: one line naming the fix: TFDS has no such dataset or config; it is not prepared
      and may not be downloaded; or the download failed (no network, a server down). The
      download is tried with few retries, so that a machine without network gets the error in
      seconds rather than after TFDS's ten retries per file with exponential backoff.
  """
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except ValueError as error:  # DatasetNotFoundError, an unknown config or version
    raise DataError(f"TFDS has no dataset {name!r} ({_first_line(error)}); pass a TFDS "
                    "translation dataset with its config, such as 'tfds:wmt14_translate/de-en' "
                    "(tfds.list_builders() names them all).") from None
  if builder.is_prepared():
    return
  where = data_dir or "~/tensorflow_datasets"
  prepare_elsewhere = (f"prepare it where there is network (`tfds build {name} "
                       f"--data_dir=DIR`) and pass --config.data.data_dir=DIR")
  if not download:
    raise DataError(f"TFDS dataset {name!r} is not prepared in {where}; {prepare_elsewhere}.")
  try:
    with _few_download_retries():
      builder.download_and_prepare()
  except Exception as error:  # pylint: disable=broad-except  (network, server, checksum)
    raise DataError(f"Could not download TFDS dataset {name!r} into {where} "
                    f"({type(error).__name__}: {_first_line(error)}); check the network, or "
                    f"{prepare_elsewhere}.") from None


def _first_line(error):
  lines = str(error).strip().splitlines()
  return " ".join(lines[0].split())[:200] if lines else type(error).__name__


@contextlib.contextmanager
def _few_download_retries(retries=DOWNLOAD_RETRIES):
  """TFDS's HTTP downloads retry MAX_RETRIES (10) times with exponential backoff, minutes
  per file where there is no network; this lowers it while the dataset downloads."""
  saved = getattr(tfds_downloader, "MAX_RETRIES", None)
  if saved is not None:
    tfds_downloader.MAX_RETRIES = retries
  try:
    yield
  finally:
    if saved is not None:
      tfds_downloader.MAX_RETRIES = saved


def train_shards(builder: Union[str, tfds.core.DatasetBuilder], tfds_split: str,
                 loaded: tf.data.Dataset, source_lang: str, target_lang: str,
                 data_dir: Optional[str] = None) -> ParallelShards:
  """A TFDS split as a ``ParallelShards`` (see module docstring).

  Args:
    builder: the prepared builder, or its name (looked up in ``data_dir``).
    tfds_split: the TFDS split name.
    loaded: the split as ``tfds.load`` / ``as_dataset`` gives it (file order), for datasets
      without TFRecord files.
    source_lang, target_lang: the example keys of each side.
    data_dir: TFDS data directory of a builder given by name.
  """
  label = f"tfds:{builder if isinstance(builder, str) else builder.name}/{tfds_split}"
  files = _record_files(builder, tfds_split, data_dir)
  if files:
    features = files[0]
    names = tf.constant([f.filename for f in files[1]])
    skips = tf.constant([f.skip for f in files[1]], tf.int64)

    def read(shard, start, count):
      records = tf.data.TFRecordDataset(tf.gather(names, shard))
      examples = records.skip(skips[shard] + start).take(count)
      return examples.map(lambda r: _sides(features.deserialize_example(r), source_lang,
                                           target_lang))
    shards = tuple(Shard(f.filename, "", f.take) for f in files[1])
    return ParallelShards(lambda: shards, read, name=label)
  count = int(loaded.cardinality())
  if count < 0:
    count = int(loaded.batch(8192).reduce(tf.constant(0, tf.int64),
                                          lambda n, b: n + tf.shape(b[source_lang],
                                                                    tf.int64)[0]))

  def read_loaded(shard, start, count):
    del shard
    return loaded.skip(start).take(count).map(
        lambda ex: _sides(ex, source_lang, target_lang))
  return ParallelShards(lambda: (Shard(label, "", count),), read_loaded, name=label)


def _record_files(builder, tfds_split, data_dir):
  """(features, file instructions) of a prepared TFRecord split, or None."""
  try:
    if isinstance(builder, str):
      builder = tfds.builder(builder, data_dir=data_dir)
    info = builder.info
    if tfds_split not in info.splits or (info.file_format and
                                         info.file_format.value != "tfrecord"):
      return None
    files = info.splits[tfds_split].file_instructions
    if not files or not all(tf.io.gfile.exists(f.filename) for f in files):
      return None
    return info.features, files
  except (ValueError, OSError) as error:  # not found, not prepared
    logging.info("TFDS %s: reading through tfds.load (%s).", builder, error)
    return None


def _sides(example, source_lang, target_lang):
  return example[source_lang], example[target_lang]


def select_languages(ds: tf.data.Dataset, source_lang: str,
                     target_lang: str) -> tf.data.Dataset:
  """``{lang: text}`` examples -> ``(source, target)`` pairs with two non-empty sides."""
  pairs = ds.map(lambda ex: (tf.strings.strip(ex[source_lang]),
                             tf.strings.strip(ex[target_lang])))
  return pairs.filter(lambda s, t: tf.logical_and(tf.strings.length(s) > 0,
                                                  tf.strings.length(t) > 0))
