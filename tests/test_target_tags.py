"""Several language pairs in one model with target-language tags (data.pairs,
data.target_tags): the corpus, the vocabularies, and every way of decoding (API, CLI,
evaluate per pair, SavedModel signatures in a fresh process, `nmt-tf serve`)."""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf import data
from nmt_tf.cli import evaluate as evaluate_cli
from nmt_tf.cli import translate as translate_cli
from nmt_tf.data import target_tags
from nmt_tf.export import export_run
from nmt_tf.server import servable as servable_lib
from tests.release_fixtures import ExportLoader, ROOT
from tests.server_fixtures import free_port, request, serve_process, ThreadServer
from tests.test_cli_decode import run_command
from tests.training_fixtures import tiny_train_config
from tests.waits import SAFETY_NET

# A second target language: the generated pair's targets, their words in reverse order.
REVERSED = "fr"


def write_corpus(directory):
  """data_dir with {train,valid,test}.{de,en,fr}: de -> en the generated pair, de -> fr the
  same with the target words reversed."""
  os.makedirs(directory, exist_ok=True)
  for split, size in (("train", 600), ("valid", 16), ("test", 8)):
    pairs = data.generate_pairs(size, seed=0, split=split, max_length=8)
    reversed_targets = [" ".join(t.split()[::-1]) for t in pairs.targets]
    for lang, lines in (("de", pairs.sources), ("en", pairs.targets),
                        (REVERSED, reversed_targets)):
      with open(os.path.join(directory, f"{split}.{lang}"), "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
  return directory


def tagged_config(directory, steps=30, tokenizer=None):
  config = tiny_train_config(steps=steps)
  config = config.replace(data=dataclasses.replace(
      config.data, name="files", data_dir=directory, pairs="de-en,de-fr", target_tags=True))
  if tokenizer:
    config = config.replace(tokenizer=dataclasses.replace(config.tokenizer, **tokenizer))
  return config


class TagsTest(tf.test.TestCase):

  def test_parse_pairs(self):
    self.assertEqual(target_tags.parse_pairs("de-en, de-fr"), [("de", "en"), ("de", "fr")])
    for bad in ("de-en,de", "de-de", "de-en,de-en", "de-en-fr"):
      with self.assertRaisesRegex(ValueError, "data.pairs"):
        target_tags.parse_pairs(bad)

  def test_several_target_languages_need_tags(self):
    with self.assertRaisesRegex(data.DataError, "has 2 target languages; set "
                                "data.target_tags=True"):
      data.CorpusConfig(name="files", pairs="de-en,de-fr")
    data.CorpusConfig(name="files", pairs="de-en,fr-en")  # one target: no tag needed

  def test_the_corpus_of_several_pairs(self):
    directory = write_corpus(self.get_temp_dir())
    config = tagged_config(directory).data
    corpus = data.load_corpus(config)
    self.assertLen(corpus["train"], 1200)
    self.assertStartsWith(corpus["train"].sources[0], "<2en> ")
    self.assertStartsWith(corpus["train"].sources[600], "<2fr> ")
    self.assertEqual(corpus["train"].sources[0][6:], corpus["train"].sources[600][6:])
    pairs = data.pair_corpora(config)
    self.assertEqual(list(pairs), ["de-en", "de-fr"])
    self.assertEqual(pairs["de-fr"]["test"].sources, corpus["test"].sources[8:])
    self.assertEqual(target_tags.target_languages(config), ("en", "fr"))
    self.assertEqual(target_tags.target_languages(dataclasses.replace(
        config, target_tags=False, pairs="de-en,fr-en")), ())

  def test_tokenizers_keep_the_tags_whole(self):
    texts = [target_tags.tagged("a dog runs on the grass", lang) for lang in ("en", "fr")]
    split = data.ParallelText(texts * 10, ["x"] * 20)
    for kind, size in (("sentencepiece", 40), ("word", 50)):
      source, _ = data.train_tokenizers(data.TokenizerConfig(kind=kind, vocab_size=size), split,
                                        symbols=("<2en>", "<2fr>", "<2de>"))
      for tag in ("<2en>", "<2fr>", "<2de>"):  # <2de> never seen: kept all the same
        self.assertIn(tag, source.vocab, kind)
        # SentencePiece: "▁" then the tag, the whitespace of the sentence start before it.
        self.assertIn(source.vocab.index(tag), source.encode(f"{tag} dog")[:2], kind)

  def test_tag_in_graph(self):
    text = tf.constant(["ein Hund", "eine Katze"])
    self.assertAllEqual(target_tags.tag_in_graph(text, tf.constant(["en", "fr"]), ("en", "fr")),
                        [b"<2en> ein Hund", b"<2fr> eine Katze"])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "give one of en, fr"):
      target_tags.tag_in_graph(text, tf.constant(["en", "de"]), ("en", "fr"))

  def test_check_language(self):
    target_tags.check_language("fr", ("en", "fr"))
    target_tags.check_language(None, ())
    for language, languages, words in (("de", ("en", "fr"), "'de' is not one the model"),
                                       (None, ("en", "fr"), "no target language given"),
                                       ("fr", (), "trained without target-language tags")):
      with self.assertRaisesRegex(target_tags.TargetLanguageError, words):
        target_tags.check_language(language, languages)


@pytest.mark.slow  # trains a tagged model, exports and serves it
class TaggedModelTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    directory = write_corpus(os.path.join(cls.tmp, "corpus"))
    cls.run_dir = os.path.join(cls.tmp, "run")
    with open(os.devnull, "w", encoding="utf-8") as log:
      nmt_tf.train(tagged_config(directory, tokenizer=dict(kind="sentencepiece",
                                                           vocab_size=120)),
                   cls.run_dir, stream=log)
    cls.model = nmt_tf.TranslationModel(cls.run_dir)
    cls.sentences = ["the king helps the boy", "a quick horse follows the birds"]

  def test_api_and_cli(self):
    self.assertEqual(self.model.target_languages, ("en", "fr"))
    src_tok = self.model.translator.source_tokenizer
    self.assertIn("<2fr>", src_tok.vocab)
    french = self.model.translate(self.sentences, target_lang="fr")
    self.assertIn("<2fr>", french[0].source_tokens[:2])
    with self.assertRaisesRegex(ValueError, "'de' is not one the model was trained for"):
      self.model.translate(self.sentences, target_lang="de")
    with self.assertRaisesRegex(ValueError, "no target language given"):
      self.model.translate(self.sentences)
    path = os.path.join(self.tmp, "input.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("".join(s + "\n" for s in self.sentences))
    code, out, err = run_command(translate_cli, run_dir=self.run_dir, input_file=path,
                                 target_lang="fr", beam_size=1)
    self.assertEqual(code, 0, err)
    greedy = self.model.translate(self.sentences, target_lang="fr", beam_size=1)
    self.assertEqual(out.splitlines(), [t.text for t in greedy])
    code, out, err = run_command(translate_cli, run_dir=self.run_dir, input_file=path,
                                 target_lang="de")
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err.splitlines()[-1], "error: target language 'de' is not one the model "
                     "was trained for; give one of en, fr (--target_lang, or target_lang in a "
                     "request).")

  def test_evaluate_reports_each_pair(self):
    code, out, err = run_command(evaluate_cli, run_dir=self.run_dir, beam_size=1,
                                 eval_dir=os.path.join(self.tmp, "eval"))
    self.assertEqual(code, 0, err)
    self.assertIn("== test_de-en\n", out)
    self.assertIn("== test_de-fr\n", out)
    for pair in ("de-en", "de-fr"):
      report = json.load(open(os.path.join(self.tmp, "eval", f"test_{pair}", "report.json"),
                              encoding="utf-8"))
      self.assertEqual(report["sentences"], 8)
    code, out, err = run_command(evaluate_cli, run_dir=self.run_dir, beam_size=1,
                                 target_lang="fr", eval_dir=os.path.join(self.tmp, "eval_fr"))
    self.assertEqual(code, 0, err)
    self.assertNotIn("test_de-en", out)
    report = json.load(open(os.path.join(self.tmp, "eval_fr", "report.json"), encoding="utf-8"))
    self.assertEqual(report["sentences"], 8)

  def test_export_in_a_fresh_process_and_serve(self):
    path = export_run(self.run_dir, export_dir=os.path.join(self.tmp, "export"),
                      report=lambda _: None)
    served = {}  # from a process with only tensorflow and tensorflow_text
    for lang in ("en", "fr", "de"):
      served[lang] = ExportLoader.request({"path": path, "text": self.sentences,
                                           "target_lang": lang})
    for lang in ("en", "fr"):
      self.assertNotIn("error", served[lang], served[lang].get("error"))
      self.assertEqual(served[lang]["greedy"], [t.text for t in self.model.translate(
          self.sentences, target_lang=lang, beam_size=1)])
    self.assertIn("give one of en, fr for every text", served["de"]["error"])
    # A run served in-process takes target_lang as its export does.
    in_process = servable_lib.load_run(self.run_dir)
    self.assertEqual(in_process.target_languages, ("en", "fr"))
    answer = in_process.versions[1]["serving_default"](
        {"text": np.array([s.encode() for s in self.sentences], object),
         "target_lang": np.array([b"fr", b"fr"], object)})
    self.assertEqual([t.decode() for t in answer["translation"]], served["fr"]["greedy"])
    # nmt-tf serve of the export: target_lang is a field of each instance; 400 for another.
    servable = servable_lib.load_export(path)
    self.assertEqual(servable.target_languages, ("en", "fr"))
    servable_lib.warm_up(servable)
    server = ThreadServer(servable)
    try:
      url = f"{server.url}/v1/models/nmt:predict"
      status, answer = request(url, {"instances": [
          {"text": self.sentences[0], "target_lang": "fr"}]})
      self.assertEqual(status, 200, answer)
      self.assertEqual(answer["predictions"][0]["translation"], served["fr"]["greedy"][0])
      status, answer = request(url, {"instances": [
          {"text": self.sentences[0], "target_lang": "de"}]})
      self.assertEqual(status, 400)
      self.assertEqual(answer["error"], "target_lang[0] is 'de', a language this model was "
                       "not trained for; give one of en, fr.")
      status, answer = request(url, {"instances": [self.sentences[0]]})
      self.assertEqual(status, 400, answer)
      out = subprocess.run([sys.executable, os.path.join(ROOT, "export", "client.py"),
                            f"--rest={server.url}", "--target_lang=fr"] + self.sentences,
                           capture_output=True, text=True, timeout=SAFETY_NET, check=False)
      self.assertEqual(out.returncode, 0, out.stderr)
      self.assertEqual([json.loads(line)["translation"] for line in out.stdout.splitlines()],
                       served["fr"]["greedy"])
      status, _ = request(url, {"instances": [{"text": "", "target_lang": "en"}]})
      self.assertEqual(status, 200)  # still serving
      with urllib.request.urlopen(server.url + "/", timeout=SAFETY_NET) as page:
        html = page.read().decode("utf-8")
      self.assertIn("&quot;target_languages&quot;: [&quot;en&quot;, &quot;fr&quot;]", html)
      self.assertIn('<select id="target_lang">', html)  # the page's menu of them
    finally:
      server.stop()
    # `nmt-tf serve` of the (SentencePiece) export in a fresh process, over gRPC.
    grpc_port = free_port()
    process, _ = serve_process([f"--export_dir={path}", f"--grpc_port={grpc_port}"])
    try:
      out = subprocess.run([sys.executable, os.path.join(ROOT, "export", "client.py"),
                            f"--server=127.0.0.1:{grpc_port}", "--target_lang=fr"] +
                           self.sentences, capture_output=True, text=True, timeout=SAFETY_NET,
                           check=False)
      self.assertEqual(out.returncode, 0, out.stderr)
      self.assertEqual([json.loads(line)["translation"] for line in out.stdout.splitlines()],
                       served["fr"]["greedy"])
    finally:
      process.terminate()
      process.wait(SAFETY_NET)


if __name__ == "__main__":
  tf.test.main()
