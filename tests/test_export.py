"""SavedModel export: reload and compare with the in-process Translator, guards, TF1-style
loading (saved_model_cli), a fresh process with only tensorflow + tensorflow_text, the op
allow-list and the TF Serving client's request/response code."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2

from nmt_tf.experiment import DecodeConfig, RunDir
from nmt_tf.export import (DEFAULT_MAX_SOURCE_LENGTH, disallowed_ops, export_run, ExportError,
                           ForbiddenOpError, METADATA_FILE, next_version, SIGNATURES,
                           WARMUP_FILE)
from nmt_tf.export.exporter import serving_decode_config
from nmt_tf.export.ops import check_forbidden_ops, saved_model_ops
from nmt_tf.export.serving import ServingModule
from nmt_tf.inference.ensemble import ModelEnsemble
from nmt_tf.inference.loading import load_models
from nmt_tf.inference.translator import Translator
from tests.release_fixtures import load_client
from tests.run_fixtures import make_tiny_run
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
SAVED_MODEL_CLI = os.path.join(os.path.dirname(PYTHON), "saved_model_cli")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def texts(values):
  return tf.constant([v.encode("utf-8") if isinstance(v, str) else v for v in values])


def decoded(tensor):
  return [v.decode("utf-8") for v in np.asarray(tensor).ravel()]


class ServingFunctionsTest(tf.test.TestCase):
  """The signatures' functions (ServingModule.signatures), run eagerly in this process without
  a SavedModel: `serving_default` is the Translator's greedy search and `beam_search` its beam
  search, in the export's output layout. ExportTest checks the saved signatures alike."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    run, _, corpus = make_tiny_run(os.path.join(cls.tmp, "run"))
    model, config, src_tok, tgt_tok = run.load_model("best")
    cls.translator = Translator(model, src_tok, tgt_tok, config.decode,
                                DEFAULT_MAX_SOURCE_LENGTH)
    # The functions the signatures trace, run eagerly.
    cls.signatures = {name: function.python_function for name, function in
                      ServingModule(cls.translator, beam_size=3, nbest=2).signatures().items()}
    cls.sentences = texts(list(corpus["test"].sources[:6]) + ["ein unbekanntes Wort ."])

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def test_greedy(self):
    got = self.signatures["serving_default"](self.sentences)
    expected = self.translator.translate(self.sentences, beam_size=1, nbest=1)
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"][:, 0]))
    self.assertAllClose(got["log_prob"], expected["log_probs"][:, 0], rtol=1e-6, atol=1e-6)
    self.assertAllEqual(got["target_length"], expected["lengths"][:, 0])
    self.assertNotIn("score", got)

  def test_beam_search(self):
    got = self.signatures["beam_search"](self.sentences)
    expected = self.translator.translate(self.sentences, beam_size=3, nbest=2)
    self.assertEqual(got["translation"].shape, (7, 2))
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"]))
    self.assertAllClose(got["score"], expected["scores"], rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # exports and serves in a fresh process
class ServingPrecisionTest(tf.test.TestCase):

  def test_auto_exports_float32_and_explicit_precisions_stay(self):
    self.assertEqual(serving_decode_config(DecodeConfig(precision="auto", beam_size=3)),
                     DecodeConfig(precision="float32", beam_size=3))
    for precision in ("float32", "float32_bf16_matmul"):
      self.assertEqual(serving_decode_config(DecodeConfig(precision=precision)).precision,
                       precision)


@pytest.mark.slow  # exports
class ExportTest(tf.test.TestCase):
  """One word-tokenizer cgru run, exported once and shared by every test."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.run_dir, cls.config, corpus = make_tiny_run(os.path.join(cls.tmp, "run"))
    # The export and the in-process Translator share one restored model, so the comparisons
    # test the export itself; test_fresh_checkpoint_load_matches_export covers reloading.
    restored = cls.run_dir.load_model("best")
    with mock.patch.object(RunDir, "load_model", return_value=restored):
      cls.path = export_run(cls.run_dir.path)
    cls.loaded = tf.saved_model.load(cls.path)
    model, config, src_tok, tgt_tok = restored
    cls.translator = Translator(model, src_tok, tgt_tok, config.decode,
                                DEFAULT_MAX_SOURCE_LENGTH)
    cls.functions = {"translate": tf.function(cls.translator.translate)}
    cls.sentences = list(corpus["test"].sources[:6]) + ["ein unbekanntes Wort .", "a"]
    cls.max_length = config.decode.max_length

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def sig(self, name, *args, **kwargs):
    outputs = self.loaded.signatures[name](*args, **kwargs)
    return {key: value.numpy() for key, value in outputs.items()}

  # Layout and signatures.
  def test_layout_and_versions(self):
    model_dir = os.path.join(self.run_dir.export_dir, "nmt")
    self.assertEqual(self.path, os.path.join(model_dir, "1"))
    self.assertEqual(sorted(os.listdir(model_dir)), ["1"])  # no temporary directory left
    for name in ("saved_model.pb", "variables"):
      self.assertTrue(os.path.exists(os.path.join(self.path, name)))
    with open(os.path.join(self.path, "assets.extra", METADATA_FILE), encoding="utf-8") as f:
      meta = json.load(f)
    self.assertEqual((meta["beam_size"], meta["nbest"], meta["version"]), (3, 3, 1))
    self.assertEqual(meta["max_source_length"], DEFAULT_MAX_SOURCE_LENGTH)
    self.assertEqual(next_version(model_dir), 2)
    self.assertEqual(next_version(os.path.join(self.tmp, "missing")), 1)
    other = os.path.join(self.tmp, "versions")
    for name in ("1", "3", "notes", ".tmp-9"):
      os.makedirs(os.path.join(other, name))
    self.assertEqual(next_version(other), 4)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ExportError, "already exists"):
      export_run(self.run_dir.path, version=1)
    with self.assertRaisesRegex(ExportError, "model_name"):
      export_run(self.run_dir.path, model_name="a/b")
    with self.assertRaisesRegex(ExportError, "nbest=4 > beam_size=3"):
      export_run(self.run_dir.path, nbest=4)
    with self.assertRaisesRegex(ExportError, "max_source_length"):
      export_run(self.run_dir.path, max_source_length=0)

  def test_signature_inputs_and_outputs(self):
    self.assertCountEqual(self.loaded.signatures.keys(), SIGNATURES)
    inputs = {name: self.loaded.signatures[name].structured_input_signature[1]
              for name in SIGNATURES}
    self.assertEqual(list(inputs["serving_default"]), ["text"])
    self.assertEqual(list(inputs["beam_search"]), ["text"])
    self.assertCountEqual(inputs["prefix"], ["text", "prefix"])
    self.assertCountEqual(inputs["beam_search_prefix"], ["text", "prefix"])
    self.assertCountEqual(inputs["beam_search_constrained"], ["text", "constraints"])
    self.assertCountEqual(inputs["score"], ["source", "target"])
    for spec in inputs["serving_default"].values():
      self.assertEqual((spec.dtype, spec.shape.as_list()), (tf.string, [None]))
    common = {"translation", "log_prob", "source_tokens", "source_length", "target_tokens",
              "target_length", "alignment", "truncated", "token_log_prob", "words",
              "word_log_prob", "word_count"}
    for name in ("serving_default", "prefix"):
      self.assertCountEqual(self.loaded.signatures[name].structured_outputs, common)
    for name in ("beam_search", "beam_search_prefix", "beam_search_constrained"):
      self.assertCountEqual(self.loaded.signatures[name].structured_outputs,
                            common | {"score"})
    self.assertCountEqual(self.loaded.signatures["score"].structured_outputs,
                          {"log_prob", "token_log_prob", "target_length", "truncated"})

  # Same output as the in-process Translator (what `run.py translate` runs).
  def test_greedy_matches_translator(self):
    expected = self.functions["translate"](texts(self.sentences), beam_size=1, nbest=1)
    got = self.sig("serving_default", text=texts(self.sentences))
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"][:, 0]))
    self.assertAllClose(got["log_prob"], expected["log_probs"][:, 0], rtol=1e-6, atol=1e-6)
    self.assertAllEqual(got["target_length"], expected["lengths"][:, 0])
    width = got["target_tokens"].shape[1]
    self.assertAllEqual(got["alignment"], expected["attention"][:, 0, :width])
    self.assertAllEqual(got["truncated"], expected["truncated"])

  def test_beam_search_matches_translator(self):
    expected = self.functions["translate"](texts(self.sentences), beam_size=3, nbest=3)
    got = self.sig("beam_search", text=texts(self.sentences))
    self.assertEqual(got["translation"].shape, (len(self.sentences), 3))
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"]))
    self.assertAllClose(got["score"], expected["scores"], rtol=1e-6, atol=1e-6)
    self.assertAllClose(got["log_prob"], expected["log_probs"], rtol=1e-6, atol=1e-6)
    self.assertAllEqual(got["target_length"], expected["lengths"])
    scores = got["score"]
    self.assertAllEqual(scores, -np.sort(-scores, axis=1))  # best first
    # The top hypothesis is the one `run.py translate` prints with the config's settings.
    top = self.functions["translate"](texts(self.sentences))  # config: beam 3, nbest 1
    self.assertEqual(decoded(got["translation"][:, 0]), decoded(top["translation"][:, 0]))

  def test_prefix_signatures_match_translator(self):
    prefixes = ["a ", "the bo", ""] + [""] * (len(self.sentences) - 3)
    prefixes = prefixes[:len(self.sentences)]
    for name, beam in (("prefix", 1), ("beam_search_prefix", 3)):
      expected = self.functions["translate"](texts(self.sentences), beam_size=beam, nbest=beam,
                                             prefix=texts(prefixes))
      got = self.sig(name, text=texts(self.sentences), prefix=texts(prefixes))
      translation = np.reshape(got["translation"], [len(self.sentences), beam])
      self.assertEqual(decoded(translation), decoded(expected["translation"]))
      for row, prefix in zip(translation, prefixes):
        for text in decoded(row):
          self.assertTrue(text.startswith(prefix.strip()), (text, prefix))
      self.assertAllClose(np.reshape(got["log_prob"], [len(self.sentences), beam]),
                          expected["log_probs"], rtol=1e-5, atol=1e-5)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "one prefix value per text"):
      self.sig("prefix", text=texts(self.sentences), prefix=texts(prefixes[:1]))

  def test_constrained_signature_matches_translator(self):
    vocab = [w.decode() for w in self.translator.target_tokenizer.id_to_token(
        tf.range(4, 40)).numpy()]
    constraints = [vocab[0], vocab[1] + "\t" + vocab[2], ""] + [vocab[3]] * 5
    constraints = constraints[:len(self.sentences)]
    expected = self.functions["translate"](texts(self.sentences), beam_size=3, nbest=3,
                                           constraints=texts(constraints))
    got = self.sig("beam_search_constrained", text=texts(self.sentences),
                   constraints=texts(constraints))
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"]))
    for i, (tokens, length) in enumerate(zip(got["target_tokens"][:, 0],
                                             got["target_length"][:, 0])):
      if not self.sentences[i].strip():
        continue
      words = [t.decode() for t in tokens[:length]]
      for phrase in filter(None, constraints[i].split("\t")):
        self.assertIn(phrase, words, (i, words))

  def test_confidence_outputs(self):
    for name in ("serving_default", "beam_search"):
      got = self.sig(name, text=texts(self.sentences))
      lengths = got["target_length"]
      token_log_prob = got["token_log_prob"]
      self.assertAllClose(token_log_prob.sum(axis=-1), np.where(lengths > 0, got["log_prob"],
                                                                token_log_prob.sum(axis=-1)),
                          atol=1e-4)
      last = np.take_along_axis(token_log_prob, np.maximum(lengths - 1, 0)[..., None], -1)
      self.assertAllClose(got["word_log_prob"].sum(axis=-1) + last[..., 0] * (lengths > 0),
                          token_log_prob.sum(axis=-1), atol=1e-4)  # words leave EOS out
      words = np.reshape(got["words"], [-1, got["words"].shape[-1]])
      tokens = np.reshape(got["target_tokens"], [-1, got["target_tokens"].shape[-1]])
      for row_words, row_tokens, count in zip(words, tokens, got["word_count"].ravel()):
        real = [t for t in row_tokens if t and t != b"</s>"]
        self.assertEqual(list(row_words[:count]), real)  # word vocabulary: a word per token

  def test_fresh_checkpoint_load_matches_export(self):
    """`run.py translate` in another process restores the checkpoint into a new model."""
    model, config, src_tok, tgt_tok = RunDir(self.run_dir.path).load_model("best")
    translator = Translator(model, src_tok, tgt_tok, config.decode, DEFAULT_MAX_SOURCE_LENGTH)
    expected = tf.function(translator.translate)(texts(self.sentences), beam_size=1, nbest=1)
    got = self.sig("serving_default", text=texts(self.sentences))
    self.assertEqual(decoded(got["translation"]), decoded(expected["translation"][:, 0]))

  def test_ensemble_export_matches_translator(self):
    other = os.path.join(self.tmp, "ensemble_member")
    make_tiny_run(other, seed=1, decoder="rnnsearch")  # same vocabularies, another model
    members = [self.run_dir.path, other]
    # Exports interrupted before (staged as older versions and as today's name them): an
    # export holds the model's lock, so any staging folder found then is left over.
    model_dir = os.path.join(self.tmp, "ensemble", "nmt")
    for name in (".tmp-1", ".tmp-7", ".2.tmp-123-456"):
      os.makedirs(os.path.join(model_dir, name, "variables"))
    notes = []
    path = export_run(self.run_dir.path, export_dir=os.path.join(self.tmp, "ensemble"),
                      checkpoints=members, warmup=False, report=notes.append)
    self.assertEqual(sorted(os.listdir(model_dir)), ["1"])
    self.assertEqual(notes, [
        f"Removed {model_dir}/{name}: left by an export that was interrupted (never a "
        "complete version)." for name in (".2.tmp-123-456", ".tmp-1", ".tmp-7")])
    with open(os.path.join(path, "assets.extra", METADATA_FILE), encoding="utf-8") as f:
      meta = json.load(f)
    self.assertEqual(meta["checkpoints"], [RunDir(p).checkpoint_path("best") for p in members])
    model, config, src_tok, tgt_tok, _ = load_models(self.run_dir.path, checkpoints=members)
    self.assertIsInstance(model, ModelEnsemble)
    translator = Translator(model, src_tok, tgt_tok, config.decode, DEFAULT_MAX_SOURCE_LENGTH)
    translate = tf.function(translator.translate)
    loaded = tf.saved_model.load(path)
    log_probs = {}
    for name, beam in (("serving_default", 1), ("beam_search", 3)):
      expected = translate(texts(self.sentences), beam_size=beam, nbest=beam)
      got = loaded.signatures[name](text=texts(self.sentences))
      translation = np.reshape(got["translation"], [len(self.sentences), beam])
      log_probs[name] = np.reshape(got["log_prob"], [len(self.sentences), beam])
      self.assertEqual(decoded(translation), decoded(expected["translation"]))
      self.assertAllClose(log_probs[name], expected["log_probs"], rtol=1e-5, atol=1e-5)
    single = self.sig("serving_default", text=texts(self.sentences))["log_prob"]
    self.assertNotAllClose(single, log_probs["serving_default"][:, 0])  # not one member alone

  def test_score_equals_search_log_prob(self):
    greedy = self.sig("serving_default", text=texts(self.sentences))
    scored = self.sig("score", source=texts(self.sentences), target=greedy["translation"])
    self.assertAllEqual(scored["target_length"], greedy["target_length"])
    self.assertAllClose(scored["log_prob"], greedy["log_prob"], rtol=1e-4, atol=1e-4)
    self.assertAllClose(scored["token_log_prob"].sum(axis=1), scored["log_prob"], atol=1e-4)
    self.assertFalse(scored["truncated"].any())

  def test_score_needs_one_target_per_source(self):
    for sources, targets in ((1, 2), (2, 1), (0, 1)):
      with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "score: the request has a "
                                  "different number of sources and targets; send one target "
                                  "per source"):
        self.sig("score", source=tf.constant(self.sentences[:sources], tf.string),
                 target=tf.constant(self.sentences[:targets], tf.string))

  def test_tokens_and_alignment_are_consistent(self):
    got = self.sig("serving_default", text=texts(self.sentences))
    src_tok = self.translator.source_tokenizer
    for i, sentence in enumerate(self.sentences):
      n_src, n_tgt = got["source_length"][i], got["target_length"][i]
      words = decoded(got["source_tokens"][i])
      expected = [src_tok.vocab[j] for j in src_tok.encode(sentence)] + ["</s>"]
      self.assertEqual(words[:n_src], expected)
      self.assertEqual(set(words[n_src:]), {""} if n_src < len(words) else set())
      tokens = decoded(got["target_tokens"][i])
      real = [t for t in tokens[:n_tgt] if t != "</s>"]
      self.assertEqual(" ".join(real), decoded(got["translation"][i:i + 1])[0])
      self.assertEqual(set(tokens[n_tgt:]), {""} if n_tgt < len(tokens) else set())
      alignment = got["alignment"][i]  # [tgt_len, src_len]
      self.assertAllClose(alignment[:n_tgt].sum(axis=1), np.ones(n_tgt), atol=1e-5)
      self.assertAllEqual(alignment[:n_tgt, n_src:], np.zeros_like(alignment[:n_tgt, n_src:]))
      self.assertAllEqual(alignment[n_tgt:], np.zeros_like(alignment[n_tgt:]))

  # Guards.
  def test_long_inputs_are_cut_and_flagged(self):
    long = " ".join(["der"] * (DEFAULT_MAX_SOURCE_LENGTH + 50))
    exact = " ".join(["der"] * DEFAULT_MAX_SOURCE_LENGTH)
    for name in ("serving_default", "beam_search"):
      got = self.sig(name, text=texts([long, exact, "der"]))
      self.assertAllEqual(got["truncated"], [True, False, False])
      self.assertAllEqual(got["source_length"], [DEFAULT_MAX_SOURCE_LENGTH + 1] * 2 + [2])
    cut = self.sig("serving_default", text=texts([long]))
    self.assertEqual(decoded(cut["translation"]),
                     decoded(self.sig("serving_default", text=texts([exact]))["translation"]))
    long_target = " ".join(["x"] * (self.max_length + 5))
    scored = self.sig("score", source=texts([long, "der", "der"]),
                      target=texts(["x", long_target, "x"]))
    self.assertAllEqual(scored["truncated"], [True, True, False])
    self.assertAllEqual(scored["target_length"], [2, self.max_length, 2])

  def test_empty_inputs_give_empty_translations(self):
    batch = texts(["", self.sentences[0], "   ", "\t\n"])
    alone = self.sig("serving_default", text=texts(self.sentences[:1]))
    got = self.sig("serving_default", text=batch)
    self.assertEqual(decoded(got["translation"]), ["", decoded(alone["translation"])[0], "", ""])
    self.assertAllEqual(got["target_length"][[0, 2, 3]], [0, 0, 0])
    self.assertAllEqual(got["log_prob"][[0, 2, 3]], [0.0, 0.0, 0.0])
    self.assertAllEqual(got["alignment"][[0, 2, 3]], np.zeros_like(got["alignment"][[0, 2, 3]]))
    self.assertEqual(set(decoded(got["target_tokens"][[0, 2, 3]])), {""})
    beam = self.sig("beam_search", text=texts(["", ""]))
    self.assertEqual(set(decoded(beam["translation"])), {""})
    self.assertAllEqual(beam["target_length"], np.zeros([2, 3]))
    self.assertAllEqual(beam["log_prob"], [[0.0, -np.inf, -np.inf]] * 2)  # one hypothesis
    self.assertEqual(beam["target_tokens"].shape[2], 0)  # nothing to pad to
    scored = self.sig("score", source=texts([""]), target=texts([""]))
    self.assertAllEqual(scored["target_length"], [1])  # EOS only
    self.assertTrue(np.isfinite(scored["log_prob"]).all())

  def test_empty_batch_gives_empty_outputs(self):
    """A request without a sentence gets every output key with batch dimension 0 and the
    dtype and rank of a non-empty batch's output."""
    empty = tf.constant([], tf.string)
    two = texts(self.sentences[:2])
    got = {"serving_default": self.sig("serving_default", text=empty),
           "beam_search": self.sig("beam_search", text=empty),
           "prefix": self.sig("prefix", text=empty, prefix=empty),
           "beam_search_prefix": self.sig("beam_search_prefix", text=empty, prefix=empty),
           "beam_search_constrained": self.sig("beam_search_constrained", text=empty,
                                               constraints=empty),
           "score": self.sig("score", source=empty, target=empty)}
    full = {"serving_default": self.sig("serving_default", text=two),
            "beam_search": self.sig("beam_search", text=two),
            "prefix": self.sig("prefix", text=two, prefix=two),
            "beam_search_prefix": self.sig("beam_search_prefix", text=two, prefix=two),
            "beam_search_constrained": self.sig("beam_search_constrained", text=two,
                                                constraints=two),
            "score": self.sig("score", source=two, target=two)}
    for name in SIGNATURES:
      self.assertCountEqual(got[name], full[name])
      for key, value in got[name].items():
        self.assertEqual((value.dtype, value.ndim), (full[name][key].dtype,
                                                     full[name][key].ndim), (name, key))
        self.assertEqual(value.shape[0], 0, (name, key))
    self.assertEqual(got["beam_search"]["translation"].shape, (0, 3))  # the n-best axis
    self.assertEqual(got["beam_search"]["alignment"].shape[:2], (0, 3))
    with self.assertRaises(tf.errors.InvalidArgumentError):  # sizes differ: still an error
      self.sig("score", source=empty, target=two)

  def test_invalid_utf8_does_not_crash(self):
    bad = [b"\xff\xfe", b"abc \xc3\x28 def", b"\xe2\x82", b"\xed\xa0\x80 der", b"der \x80"]
    for name in ("serving_default", "beam_search"):
      got = self.sig(name, text=tf.constant(bad))
      decoded(got["translation"])  # valid UTF-8
      decoded(got["source_tokens"])
    got = self.sig("serving_default", text=tf.constant(bad))
    replaced = self.sig("serving_default",
                        text=texts(["\ufffd\ufffd", "abc \ufffd( def", "\ufffd",
                                    "\ufffd\ufffd\ufffd der", "der \ufffd"]))
    self.assertEqual(decoded(got["translation"]), decoded(replaced["translation"]))
    scored = self.sig("score", source=tf.constant(bad), target=tf.constant(bad))
    self.assertTrue(np.isfinite(scored["log_prob"]).all())

  def test_batch_of_1_and_256(self):
    batch = [self.sentences[i % len(self.sentences)] for i in range(256)]
    reference = {name: self.sig(name, text=texts(self.sentences)) for name in
                 ("serving_default", "beam_search")}
    for name in ("serving_default", "beam_search"):
      one = self.sig(name, text=texts(self.sentences[:1]))
      self.assertEqual(one["translation"].shape[0], 1)
      self.assertEqual(decoded(one["translation"]),
                       decoded(reference[name]["translation"][:1]))
      many = self.sig(name, text=texts(batch))
      self.assertEqual(many["translation"].shape[0], 256)
      self.assertEqual(decoded(many["translation"]),
                       decoded(np.concatenate([reference[name]["translation"]] * 33)[:256]))
    scored = self.sig("score", source=texts(batch), target=texts(batch))
    self.assertEqual(scored["log_prob"].shape, (256,))

  # Loading elsewhere.
  @pytest.mark.slow
  def test_fresh_process_with_only_tensorflow_and_text(self):
    script = (
        "import json, sys\n"
        "import tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "text = tf.constant(json.loads(sys.argv[2]))\n"
        "g = m.signatures['serving_default'](text=text)\n"
        "b = m.signatures['beam_search'](text=text)\n"
        "s = m.signatures['score'](source=text, target=g['translation'])\n"
        "prefix = tf.constant(json.loads(sys.argv[3]))\n"
        "p = m.signatures['prefix'](text=text, prefix=prefix)\n"
        "bp = m.signatures['beam_search_prefix'](text=text, prefix=prefix)\n"
        "c = m.signatures['beam_search_constrained'](text=text, constraints=prefix)\n"
        "e = tf.constant([], tf.string)\n"
        "empty = {'serving_default': m.signatures['serving_default'](text=e),\n"
        "  'beam_search': m.signatures['beam_search'](text=e),\n"
        "  'prefix': m.signatures['prefix'](text=e, prefix=e),\n"
        "  'beam_search_prefix': m.signatures['beam_search_prefix'](text=e, prefix=e),\n"
        "  'score': m.signatures['score'](source=e, target=e)}\n"
        "assert not any(n.startswith(('nmt_tf', 'tests')) for n in sys.modules)\n"
        "print(json.dumps({'greedy': [t.decode() for t in g['translation'].numpy()],\n"
        "  'beam': [t.decode() for t in b['translation'].numpy().ravel()],\n"
        "  'prefix': [t.decode() for t in p['translation'].numpy()],\n"
        "  'beam_prefix': [t.decode() for t in bp['translation'].numpy().ravel()],\n"
        "  'constrained': [t.decode() for t in c['translation'].numpy().ravel()],\n"
        "  'score': s['log_prob'].numpy().tolist(),\n"
        "  'empty': {n: {k: [v.dtype.name] + v.shape.as_list() for k, v in o.items()}\n"
        "            for n, o in empty.items()}}))\n")
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    prefixes = (["a ", "the bo"] + [""] * len(self.sentences))[:len(self.sentences)]
    out = subprocess.run([PYTHON, "-c", script, self.path, json.dumps(self.sentences),
                          json.dumps(prefixes)],
                         cwd=self.tmp, env=env, capture_output=True, text=True, timeout=SAFETY_NET)
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    greedy = self.sig("serving_default", text=texts(self.sentences))
    beam = self.sig("beam_search", text=texts(self.sentences))
    self.assertEqual(result["greedy"], decoded(greedy["translation"]))
    self.assertEqual(result["beam"], decoded(beam["translation"]))
    self.assertAllClose(result["score"], greedy["log_prob"], rtol=1e-4, atol=1e-4)
    prefixed = self.sig("prefix", text=texts(self.sentences), prefix=texts(prefixes))
    beam_prefixed = self.sig("beam_search_prefix", text=texts(self.sentences),
                             prefix=texts(prefixes))
    self.assertEqual(result["prefix"], decoded(prefixed["translation"]))
    self.assertEqual(result["beam_prefix"], decoded(beam_prefixed["translation"]))
    constrained = self.sig("beam_search_constrained", text=texts(self.sentences),
                           constraints=texts(prefixes))
    self.assertEqual(result["constrained"], decoded(constrained["translation"]))
    outputs = {"serving_default": greedy, "beam_search": beam, "prefix": prefixed,
               "beam_search_prefix": beam_prefixed,
               "score": self.sig("score", source=texts(self.sentences),
                                 target=texts(self.sentences))}
    for name, empty in result["empty"].items():  # an empty batch: every output, batch 0
      self.assertCountEqual(empty, outputs[name])
      specs = self.loaded.signatures[name].structured_outputs
      for key, (dtype, batch, *_) in empty.items():
        self.assertEqual((dtype, batch), (specs[key].dtype.name, 0), (name, key))
        self.assertLen(empty[key], 1 + outputs[name][key].ndim)

  @pytest.mark.slow
  def test_saved_model_cli_show_and_run(self):
    show = subprocess.run([SAVED_MODEL_CLI, "show", "--all", "--dir", self.path], env=ENV,
                          capture_output=True, text=True, timeout=SAFETY_NET)
    self.assertEqual(show.returncode, 0, show.stderr[-3000:])
    for word in SIGNATURES + ("truncated", "alignment", "token_log_prob"):
      self.assertIn(word, show.stdout)
    # `run` loads with the TF1 session loader, as the TF Serving model server does.
    for signature, exprs in (("beam_search", 'text=["der Hund", ""]'),
                             ("score", 'source=["der Hund"];target=["x"]')):
      run = subprocess.run(
          [SAVED_MODEL_CLI, "run", "--dir", self.path, "--tag_set", "serve",
           "--signature_def", signature, "--input_exprs", exprs], env=ENV,
          capture_output=True, text=True, timeout=SAFETY_NET)
      self.assertEqual(run.returncode, 0, run.stderr[-3000:])
      self.assertIn("Result for output key log_prob", run.stdout)

  # Ops.
  def test_ops_are_in_the_serving_allow_list(self):
    ops = saved_model_ops(self.path)
    self.assertIn("While", ops)  # function bodies are walked, not only the outer graph
    self.assertIn("LookupTableFindV2", ops)
    self.assertEqual(disallowed_ops(self.path), [])

  def test_py_function_is_caught(self):
    module = tf.Module()
    module.f = tf.function(lambda x: tf.py_function(lambda y: y + 1, [x], tf.float32),
                           input_signature=[tf.TensorSpec([], tf.float32)])
    path = os.path.join(self.tmp, "py_function")
    tf.saved_model.save(module, path)
    self.assertIn("EagerPyFunc", disallowed_ops(path))
    with self.assertRaisesRegex(ForbiddenOpError, "EagerPyFunc"):
      check_forbidden_ops(path)

  # The TF Serving client (no model server here: its requests are fed to the signatures).
  def serve(self, request):
    """What the model server does with a PredictRequest, on the loaded SavedModel."""
    client = load_client()
    inputs = {k: tf.constant(v) for k, v in client.request_inputs(request).items()}
    outputs = self.loaded.signatures[request.model_spec.signature_name](**inputs)
    response = predict_pb2.PredictResponse()
    response.model_spec.CopyFrom(request.model_spec)
    for name, value in outputs.items():
      response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
    return response

  def test_client_grpc_requests_and_responses(self):
    client = load_client()
    sentences = self.sentences[:3] + [""]
    for signature in ("serving_default", "beam_search"):
      request = client.predict_request(sentences, "nmt", signature, version=1)
      self.assertEqual((request.model_spec.name, request.model_spec.version.value),
                       ("nmt", 1))
      results = client.to_results(client.response_to_dict(self.serve(request)), signature)
      direct = self.sig(signature, text=texts(sentences))
      self.assertLen(results, len(sentences))
      for i, result in enumerate(results):
        hypotheses = [result] if signature == "serving_default" else result["nbest"]
        first = decoded(np.asarray(direct["translation"][i]).ravel()[:1])[0]
        self.assertEqual(hypotheses[0]["translation"], first)
        n = int(np.asarray(direct["target_length"][i]).ravel()[0])
        self.assertLen(hypotheses[0]["target_tokens"], n)
        self.assertEqual(np.asarray(hypotheses[0]["alignment"]).shape,
                         (n, direct["source_length"][i]) if n else (0,))
        self.assertEqual(result["source_tokens"][-1], "</s>")
      empty = results[-1] if signature == "serving_default" else results[-1]["nbest"][0]
      self.assertEqual(empty["translation"], "")
      if signature == "beam_search":
        self.assertLen(results[-1]["nbest"], 1)
    request = client.predict_request(["der Hund"], signature_name="score", targets=["x"])
    [scored] = client.to_results(client.response_to_dict(self.serve(request)), "score")
    direct = self.sig("score", source=texts(["der Hund"]), target=texts(["x"]))
    self.assertAllClose(scored["log_prob"], direct["log_prob"][0])
    self.assertEqual(scored["target_length"], 2)

  def test_warmup_requests_replay(self):
    """TF Serving replays assets.extra/tf_serving_warmup_requests at load: every record is a
    PredictLog whose request runs on its signature."""
    path = os.path.join(self.path, "assets.extra", WARMUP_FILE)
    logs = [prediction_log_pb2.PredictionLog.FromString(record.numpy())
            for record in tf.data.TFRecordDataset(path)]
    self.assertLen(logs, 24)  # 6 signatures x (1, 8 sentences) x (short, long)
    self.assertEqual({log.predict_log.request.model_spec.signature_name for log in logs},
                     set(SIGNATURES))
    client = load_client()
    batches, source_lengths = set(), set()
    for log in logs:
      request = log.predict_log.request
      self.assertEqual(request.model_spec.name, "nmt")
      outputs = client.response_to_dict(self.serve(request))
      batch = len(next(iter(client.request_inputs(request).values())))
      self.assertLen(outputs["log_prob"], batch)
      batches.add(batch)
      if "source_length" in outputs:
        source_lengths.add(int(outputs["source_length"][0]))
    self.assertEqual(sorted(batches), [1, 8])
    self.assertLen(source_lengths, 2)  # a short and a long sentence

  def test_client_rest_body_and_answer(self):
    client = load_client()
    body = json.loads(json.dumps(client.rest_body(["der Hund", ""], "beam_search")))
    self.assertEqual(body, {"signature_name": "beam_search",
                            "inputs": {"text": ["der Hund", ""]}})
    direct = self.loaded.signatures["beam_search"](text=tf.constant(body["inputs"]["text"]))
    # The model server's columnar JSON answer: strings as text, numbers as lists.
    answer = {"outputs": {k: (np.vectorize(bytes.decode)(v.numpy()) if v.dtype == tf.string
                              else v.numpy()).tolist() for k, v in direct.items()}}
    answer = json.loads(json.dumps(answer))
    rest = client.to_results(client.rest_outputs(answer), "beam_search")
    grpc = client.to_results(client.response_to_dict(
        self.serve(client.predict_request(["der Hund", ""], signature_name="beam_search"))),
        "beam_search")
    self.assertEqual(json.dumps(rest), json.dumps(grpc))
    with self.assertRaisesRegex(ValueError, "signature_name"):
      client.predict_request(["x"], signature_name="nope")
    with self.assertRaisesRegex(ValueError, "one target per source"):
      client.rest_body(["x", "y"], "score", targets=["a"])
@pytest.mark.slow  # exports
class SelfAttentiveExportTest(tf.test.TestCase):
  """The self-attentive decoders export (their step carries the summaries and the state
  buffer through the search) and the SavedModel gives the Translator's greedy and beam output
  and its scores."""

  def check_round_trip(self, decoder, **overrides):
    tmp = self.get_temp_dir()
    run, config, corpus = make_tiny_run(os.path.join(tmp, decoder), decoder=decoder,
                                        **overrides)
    restored = run.load_model("best")
    with mock.patch.object(RunDir, "load_model", return_value=restored):
      path = export_run(run.path)
    loaded = tf.saved_model.load(path)
    model, _, src_tok, tgt_tok = restored
    translator = Translator(model, src_tok, tgt_tok, config.decode, DEFAULT_MAX_SOURCE_LENGTH)
    sentences = texts(list(corpus["test"].sources[:5]))
    translate = tf.function(translator.translate)
    greedy = translate(sentences, beam_size=1, nbest=1)
    got = loaded.signatures["serving_default"](text=sentences)
    self.assertEqual(decoded(got["translation"]), decoded(greedy["translation"][:, 0]))
    self.assertAllClose(got["log_prob"], greedy["log_probs"][:, 0], atol=1e-5)
    beam = translate(sentences, beam_size=3, nbest=3)
    got = loaded.signatures["beam_search"](text=sentences)
    self.assertEqual(decoded(got["translation"]), decoded(beam["translation"]))
    self.assertAllClose(got["log_prob"], beam["log_probs"], atol=1e-5)
    scored = loaded.signatures["score"](source=sentences, target=got["translation"][:, 0])
    self.assertAllClose(scored["log_prob"], beam["log_probs"][:, 0], atol=1e-4)

  def test_self_attentive_rnn(self):
    self.check_round_trip("self_attentive_rnn")

  def test_self_attentive_residual_cavg(self):
    self.check_round_trip("self_attentive_residual", summary="cavg")


@pytest.mark.slow  # exports
class SentencePieceExportTest(tf.test.TestCase):
  """A SentencePiece run (the Multi30k configs' tokenizer) exports, passes the op allow-list
  and serves from a fresh process that imports only tensorflow and tensorflow_text."""

  def test_sentencepiece_export_in_fresh_process(self):
    tmp = self.get_temp_dir()
    run, config, corpus = make_tiny_run(os.path.join(tmp, "sp_run"), tokenizer="sentencepiece",
                                        decoder="self_attentive_residual")
    model, _, src_tok, tgt_tok = restored = run.load_model("best")
    with mock.patch.object(RunDir, "load_model", return_value=restored):
      path = export_run(run.path)
    self.assertEqual(disallowed_ops(path), [])
    self.assertIn("SentencepieceOp", saved_model_ops(path))
    sentences = list(corpus["test"].sources[:3]) + [""]
    translator = Translator(model, src_tok, tgt_tok, config.decode, DEFAULT_MAX_SOURCE_LENGTH)
    expected = tf.function(translator.translate)(texts(sentences), beam_size=1)
    script = (
        "import json, sys\n"
        "import tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "g = m.signatures['serving_default'](text=tf.constant(json.loads(sys.argv[2])))\n"
        "print(json.dumps([t.decode() for t in g['translation'].numpy()]))\n")
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    out = subprocess.run([PYTHON, "-c", script, path, json.dumps(sentences)], cwd=tmp, env=env,
                         capture_output=True, text=True, timeout=SAFETY_NET)
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    served = json.loads(out.stdout.strip().splitlines()[-1])
    # The export gives empty input an empty translation without decoding it.
    self.assertEqual(served[:-1], decoded(expected["translation"][:-1, 0]))
    self.assertEqual(served[-1], "")


