"""Corpus sources: text files and their errors, generated pair, Multi30k, TFDS plumbing."""

import gzip
import os
from unittest import mock

import pytest
import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import multi30k
from nmt_tf.data import multi30k_tfds
from nmt_tf.data import tfds_source

MULTI30K_DIR = multi30k.default_dir()
NO_MULTI30K = ("no local Multi30k copy (set NMT_TF_MULTI30K_DIR or provide "
               "../shared/data/multi30k); the tests never download it")


def _write(path, lines, gz=False, raw=None):
  content = raw if raw is not None else "".join(line + "\n" for line in lines).encode()
  with (gzip.open if gz else open)(path, "wb") as f:
    f.write(content)
  return path


class TextFilesTest(tf.test.TestCase):

  def test_reads_plain_and_gzip_and_skips_empty_pairs(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "a.src"), ["ein Hund", "", "eine Katze", "x"])
    tgt = _write(os.path.join(d, "a.tgt.gz"), ["a dog", "empty", "a cat\r", ""], gz=True)
    text = data.read_parallel(src, tgt)
    self.assertEqual(text.sources, ["ein Hund", "eine Katze"])
    self.assertEqual(text.targets, ["a dog", "a cat"])

  def test_missing_file(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "m.src"), ["a"])
    with self.assertRaisesRegex(data.DataError, r"target file not found: .*nope\.tgt"):
      data.read_parallel(src, os.path.join(d, "nope.tgt"))

  def test_line_counts_differ(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "c.src"), ["a", "b", "c"])
    tgt = _write(os.path.join(d, "c.tgt"), ["a", "b"])
    with self.assertRaisesRegex(data.DataError,
                                r"source .*c\.src has 3 lines, target .*c\.tgt has 2 lines"):
      data.read_parallel(src, tgt)

  def test_invalid_utf8_names_file_and_line(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "u.src"), None, raw=b"fine\nstill fine\ncaf\xe9\n")
    tgt = _write(os.path.join(d, "u.tgt"), ["a", "b", "c"])
    with self.assertRaisesRegex(data.DataError,
                                r"u\.src line 3: not valid UTF-8 .*re-encode the file"):
      data.read_parallel(src, tgt)

  def test_carriage_return_line_endings(self):
    d = self.get_temp_dir()
    mac = _write(os.path.join(d, "mac.src"), None, raw=b"ein Hund\reine Katze\rx\r")
    tgt = _write(os.path.join(d, "mac.tgt"), ["a dog", "a cat", "x"])
    with self.assertRaisesRegex(
        data.DataError, r"mac\.src line 1: old Mac line endings: the whole input is one line "
        r"with 3 carriage returns .*`tr '\\r' '\\n' < IN > OUT` or `dos2unix -c mac FILE`"):
      data.read_parallel(mac, tgt)
    gz = _write(os.path.join(d, "mac.src.gz"), None, raw=b"a\rb\r", gz=True)
    with self.assertRaisesRegex(data.DataError, r"mac\.src\.gz line 1: old Mac line endings"):
      data.read_lines(gz)
    mixed = _write(os.path.join(d, "mixed.src"), None, raw=b"a\r\nb c\rd\ne\n")
    with self.assertRaisesRegex(data.DataError, r"mixed\.src line 2: carriage return \(\\r\) "
                                r"at column 4 inside the line .*dos2unix -c mac"):
      data.read_lines(mixed)
    for error in (self._error(data.read_lines, mac), self._error(data.read_lines, mixed)):
      self.assertNotIn("\n", error)
    dos = _write(os.path.join(d, "dos.src"), None, raw=b"ein Hund\r\neine Katze\r\nx\r")
    self.assertEqual(data.read_lines(dos), ["ein Hund", "eine Katze", "x"])

  def _error(self, function, *args):
    with self.assertRaises(data.DataError) as raised:
      function(*args)
    return str(raised.exception)

  def test_all_empty_corpus(self):
    d = self.get_temp_dir()
    src = _write(os.path.join(d, "e.src"), ["", " "])
    tgt = _write(os.path.join(d, "e.tgt"), ["a", ""])
    with self.assertRaisesRegex(data.DataError, "Empty corpus"):
      data.read_parallel(src, tgt)

  def test_files_corpus_from_directory_and_explicit_paths(self):
    d = os.path.join(self.get_temp_dir(), "gen")
    paths = data.write_corpus(d, seed=3, train_size=20, valid_size=5, test_size=4)
    corpus = data.load_corpus("files", data_dir=d, source_lang="src", target_lang="tgt")
    self.assertEqual({k: len(v) for k, v in corpus.items()},
                     {"train": 20, "valid": 5, "test": 4})
    self.assertEqual(corpus["train"].sources,
                     data.generate_pairs(20, seed=3, split="train").sources)
    explicit = data.load_corpus(data.CorpusConfig(
        name="files", train_src=paths["train"][0], train_tgt=paths["train"][1]))
    self.assertEqual(list(explicit), ["train"])

  def test_config_errors(self):
    with self.assertRaisesRegex(data.DataError, r"Unknown corpus config keys \['trian_src'\]"):
      data.CorpusConfig.from_dict({"trian_src": "x"})
    with self.assertRaisesRegex(data.DataError, "Unknown corpus name 'wmt'"):
      data.load_corpus("wmt")
    with self.assertRaisesRegex(data.DataError, "needs source_lang and target_lang"):
      data.load_corpus("files", data_dir=self.get_temp_dir())


class GeneratedTest(tf.test.TestCase):

  def test_deterministic_from_seed(self):
    a = data.generate_corpus(seed=7, train_size=50, valid_size=5, test_size=5)
    b = data.generate_corpus(seed=7, train_size=50, valid_size=5, test_size=5)
    c = data.generate_corpus(seed=8, train_size=50, valid_size=5, test_size=5)
    self.assertEqual(a["train"].sources, b["train"].sources)
    self.assertEqual(a["test"].targets, b["test"].targets)
    self.assertNotEqual(a["train"].sources, c["train"].sources)
    self.assertNotEqual(a["train"].sources[:5], a["valid"].sources)

  def test_small_vocab_long_sentences_and_reordering(self):
    text = data.generate_pairs(2000, seed=0)
    src_vocab = {w for s in text.sources for w in s.split()}
    tgt_vocab = {w for s in text.targets for w in s.split()}
    self.assertBetween(len(src_vocab), 20, 200)
    self.assertBetween(len(tgt_vocab), 20, 200)
    lengths = [len(s.split()) for s in text.sources + text.targets]
    self.assertLessEqual(max(lengths), 60)
    self.assertGreater(max(lengths), 45)
    self.assertLess(min(lengths), 8)
    # SVO -> SOV: the verb moves to the end of the clause.
    pair = data.generate_pairs(1, seed=0, max_clauses=1, relative_prob=0.0)
    tgt = pair.targets[0].split()
    self.assertRegex(tgt[-1], "(as|ant)$")

  def test_bad_arguments(self):
    with self.assertRaisesRegex(data.DataError, "max_length=3"):
      data.generate_pairs(1, max_length=3)


@mock.patch.object(tfds_source.tfds, "load")
class TfdsPlumbingTest(tf.test.TestCase):

  def test_name_and_direction(self, load):
    del load
    self.assertEqual(data.parse_tfds_name("wmt14_translate/fr-en"),
                     ("wmt14_translate/fr-en", "fr", "en"))
    self.assertEqual(data.parse_tfds_name("wmt14_translate/fr-en", source_lang="en"),
                     ("wmt14_translate/fr-en", "en", "fr"))
    self.assertEqual(data.parse_tfds_name("wmt14_translate/de-en:1.0.0", target_lang="de"),
                     ("wmt14_translate/de-en:1.0.0", "en", "de"))
    with self.assertRaisesRegex(data.DataError, r"has languages \('fr', 'en'\)"):
      data.parse_tfds_name("wmt14_translate/fr-en", source_lang="de")
    with self.assertRaisesRegex(data.DataError, "Cannot tell the languages"):
      data.parse_tfds_name("some_translate")

  def test_load_maps_splits_and_sides(self, load):
    def fake_load(name, split, **kwargs):
      del name, kwargs
      return tf.data.Dataset.from_tensor_slices(
          {"fr": [f"{split} fr", "", "x"], "en": [f"{split} en", "y", "z "]})
    load.side_effect = fake_load
    with mock.patch.object(tfds_source, "prepare") as prepare:
      corpus = data.load_corpus("tfds:wmt14_translate/fr-en", source_lang="en",
                                data_dir="/tmp/tfds")
    prepare.assert_called_once_with("wmt14_translate/fr-en", "/tmp/tfds", True)
    self.assertEqual(
        [c.kwargs.get("split", c.args[1] if len(c.args) > 1 else None)
         for c in load.call_args_list], ["train", "validation", "test"])
    self.assertEqual(load.call_args.args[0], "wmt14_translate/fr-en")
    self.assertEqual(load.call_args.kwargs["data_dir"], "/tmp/tfds")
    self.assertEqual(list(corpus["valid"].as_numpy_iterator()),
                     [(b"validation en", b"validation fr"), (b"z", b"x")])


class UnreachableTranslate(tfds_source.tfds.core.GeneratorBasedBuilder):
  """A TFDS translation dataset whose only file is on a port where nothing listens: what a
  machine without network sees of every download."""

  VERSION = tfds_source.tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [tfds_source.tfds.core.BuilderConfig(name="de-en")]

  def _info(self):
    return self.dataset_info_from_configs(
        features=tfds_source.tfds.features.Translation(languages=["de", "en"]))

  def _split_generators(self, dl_manager):
    dl_manager.download("http://127.0.0.1:9/corpus.tgz")
    return {"train": iter(())}

  def _generate_examples(self):
    yield from ()


class TfdsErrorsTest(tf.test.TestCase):

  def test_unknown_dataset_or_config(self):
    for name, found in (("no_such_dataset/xx-yy", "Dataset no_such_dataset not found"),
                        ("unreachable_translate/xx-yy", "BuilderConfig xx-yy not found")):
      with self.assertRaisesRegex(data.DataError, f"^TFDS has no dataset '{name}' \\(.*"
                                  f"{found}.*\\); pass a TFDS translation dataset with its "
                                  "config, such as 'tfds:wmt14_translate/de-en'"):
        data.load_corpus(f"tfds:{name}", data_dir=self.get_temp_dir())

  def test_download_without_network_fails_in_seconds_naming_the_fix(self):
    data_dir = self.get_temp_dir()
    with self.assertRaisesRegex(data.DataError, f"^Could not download TFDS dataset "
                                f"'unreachable_translate/de-en' into {data_dir} \\("
                                ".*Max retries exceeded.*; check the network, or prepare it "
                                "where there is network .*--config.data.data_dir=DIR"):
      data.load_corpus("tfds:unreachable_translate/de-en", data_dir=data_dir)
    self.assertEqual(tfds_source.tfds_downloader.MAX_RETRIES, 10)  # TFDS's own, restored
    with self.assertRaisesRegex(data.DataError, "is not prepared in"):
      tfds_source.prepare("unreachable_translate/de-en", data_dir, download=False)


class Multi30kTest(tf.test.TestCase):

  def test_env_var_wins(self):
    with mock.patch.dict(os.environ, {multi30k.ENV_VAR: "/some/where"}):
      self.assertEqual(multi30k.default_dir(), "/some/where")
    with self.assertRaisesRegex(data.DataError, "language pair 'de-xx'"):
      multi30k.parse_pair("de-xx")

  def test_missing_directory(self):
    with self.assertRaisesRegex(data.DataError, "Multi30k directory not found"):
      data.load_multi30k("de-en", os.path.join(self.get_temp_dir(), "absent"))

  @mock.patch.object(multi30k, "URL", "http://invalid.invalid/{}.{}")
  def test_local_files_sizes(self):
    if not MULTI30K_DIR:
      self.skipTest(NO_MULTI30K)
    corpus = data.load_corpus("multi30k/en-fr")
    self.assertEqual({k: len(v) for k, v in corpus.items()},
                     {"train": 29000, "valid": 1014, "test": 1000})
    self.assertStartsWith(corpus["train"].sources[0], "Two young, White males")

  @mock.patch.object(multi30k, "URL", "http://invalid.invalid/{}.{}")
  @pytest.mark.slow  # builds the TFDS dataset of the local files
  def test_tfds_builder_on_local_files(self):
    if not MULTI30K_DIR:
      self.skipTest(NO_MULTI30K)
    corpus = data.load_corpus("multi30k/en-de", use_tfds=True,
                              tfds_data_dir=self.get_temp_dir())
    sizes = {k: int(corpus[k].reduce(0, lambda n, _: n + 1)) for k in ("valid", "test")}
    self.assertEqual(sizes, {"valid": 1014, "test": 1000})
    builder = multi30k_tfds.Multi30k(config="de-en", data_dir=self.get_temp_dir())
    self.assertEqual(builder.info.splits["train"].num_examples, 29000)
    src, tgt = next(corpus["test"].as_numpy_iterator())
    direct = data.load_multi30k("en-de")["test"]
    index = direct.sources.index(src.decode())
    self.assertEqual(direct.targets[index], tgt.decode())


if __name__ == "__main__":
  tf.test.main()
