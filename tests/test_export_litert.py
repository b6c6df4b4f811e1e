"""LiteRT export: its client, in a Python that has no TensorFlow, gives the tokens of the
SavedModel's greedy signature on a trained tiny SentencePiece run, and its beam search; the
quantized models; empty batch, empty and blank strings, invalid UTF-8 and over-long input as
in the SavedModel; the loops without TensorArrays; the client's word splitting."""

import dataclasses
import io
import json
import os
import re
import shutil
import tempfile

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import word_tokenizer
from nmt_tf.experiment import DecodeConfig, RunDir
from nmt_tf.export import export_litert, export_run, LiteRTExportError
from nmt_tf.export import litert_client
from nmt_tf.export.litert import CLIENT_FILE, convert, MODEL_FILE, search_functions
from nmt_tf.inference.translator import Translator
from nmt_tf.layers.kernels import scan_time, without_tensor_lists
from nmt_tf.models import Seq2Seq
from nmt_tf.training import Trainer
from tests.model_fixtures import batch, tiny_config, VARIANTS
from tests.release_fixtures import litert_translate
from tests.training_fixtures import tiny_train_config

MAX_SOURCE = 9  # tokens; the long input below has more


class BufferLoopTest(tf.test.TestCase):
  """scan_time without TensorArrays: the same outputs and final state."""

  def test_same_values_as_tensor_arrays(self):
    x = tf.random.stateless_normal([3, 5, 4], seed=[1, 2])  # [batch, time, dim]
    w = tf.random.stateless_normal([4, 4], seed=[3, 4])

    def step(x_t, state, t):
      new = tf.tanh(tf.matmul(x_t + state, w)) + tf.cast(t, tf.float32)
      return {"h": new, "twice": 2.0 * new}, new

    @tf.function(input_signature=[tf.TensorSpec([None, None, 4])])
    def run(x):
      return scan_time(step, x, tf.zeros([tf.shape(x)[0], 4]))

    @tf.function(input_signature=[tf.TensorSpec([None, None, 4])])
    def run_buffers(x):
      with without_tensor_lists():
        return scan_time(step, x, tf.zeros([tf.shape(x)[0], 4]))

    expected, buffered = run(x), run_buffers(x)
    self.assertAllClose(expected, buffered, rtol=0, atol=0)
    ops = {op.type for op in run_buffers.get_concrete_function().graph.get_operations()}
    body_ops = {node.op for f in run_buffers.get_concrete_function().graph.as_graph_def()
                .library.function for node in f.node_def}
    self.assertEmpty({op for op in ops | body_ops if op.startswith("TensorList")})


class ClientWordsTest(tf.test.TestCase):
  """The client splits and joins words as the WordTokenizer does (its own copy of the
  patterns, since it runs without nmt_tf)."""

  def test_patterns_are_the_tokenizers(self):
    self.assertEqual(litert_client._SPACES.pattern,  # pylint: disable=protected-access
                     word_tokenizer._SPACES_PY.pattern)  # pylint: disable=protected-access
    self.assertEqual(litert_client._PUNCT.pattern,  # pylint: disable=protected-access
                     word_tokenizer._PUNCT)  # pylint: disable=protected-access
    self.assertEqual(litert_client._ATTACH, word_tokenizer._ATTACH)  # pylint: disable=protected-access

  def test_encode_and_decode_as_the_tokenizer(self):
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "a", "dog", ".", '"', "(", ")", "runs", ","]
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp)
    path = os.path.join(tmp, "v.vocab")
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(w + "\n" for w in vocab)
    for split in (True, False):
      tokenizer = word_tokenizer.WordTokenizer(vocab, split)
      words = litert_client._Words(path, split)  # pylint: disable=protected-access
      for text in ['a dog runs.', '"a  dog" (runs),\ta <s> cat', "\u3000a\u00a0dog ", ""]:
        self.assertEqual(words.encode(text), tokenizer.encode(text), text)
        ids = tokenizer.encode(text)
        self.assertEqual(words.decode(litert_client._strip(ids + [3])),  # pylint: disable=protected-access
                         tokenizer.decode(ids + [3]), text)

  def test_clean_replaces_invalid_utf8(self):
    self.assertEqual(litert_client.clean(b"a\xffb\xe2\x82"), "a\ufffdb\ufffd")
    self.assertEqual(litert_client.clean("a\udcffb"), "a\ufffdb")  # surrogate-escaped byte
    self.assertEqual(litert_client.clean("h\u00e4"), "h\u00e4")


class ConvertErrorsTest(tf.test.TestCase):

  def test_unknown_quantization(self):
    with self.assertRaisesRegex(LiteRTExportError, "quantization='int4'"):
      convert({}, quantization="int4")


@pytest.mark.slow  # converts three models
class VariantsConvertTest(tf.test.TestCase):
  """Models whose steps take other code paths than the cgru's convert to builtin ops, and
  their greedy and beam searches give the ids and log-probabilities of TensorFlow: LSTM cells
  with dot scores, a unidirectional encoder over reversed sources, and the state memory with
  layer normalization, a deep transition and the lexical model (tests/model_fixtures.py)."""

  def check(self, variant):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    model = Seq2Seq(tiny_config(**VARIANTS[variant]))
    model.build_with_dummy_batch()
    translator = Translator(model, None, None,
                            DecodeConfig(precision="float32", beam_size=2, max_length=12), 50)
    functions = search_functions(translator, beam_size=2, nbest=2)
    interpreter = Interpreter(model_content=convert(functions))
    source = batch()["source"]  # [3, 5]: lengths 5, 3, 1
    for name, function in functions.items():
      expected = function(source)
      found = interpreter.get_signature_runner(name)(source_ids=source.numpy())
      self.assertAllEqual(found["ids"], expected["ids"], name)
      self.assertAllEqual(found["length"], expected["length"], name)
      self.assertAllClose(found["log_prob"], expected["log_prob"], atol=1e-4)
      self.assertAllClose(found["attention"], expected["attention"], atol=1e-4)

  def test_luong_lstm_dot(self):
    self.check("luong_lstm_dot")

  def test_cgru_rnn_reversed(self):
    self.check("cgru_rnn_reversed")

  def test_memory_rnn_deep_ln(self):
    self.check("memory_rnn_deep_ln")


@pytest.mark.slow  # trains, exports three times, installs a Python without TensorFlow
class LiteRTExportTest(tf.test.TestCase):
  """A tiny SentencePiece run trained briefly, exported as a SavedModel and as LiteRT
  float32 and int8; the LiteRT models run in a virtualenv without TensorFlow."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    config = tiny_train_config(steps=40, alignment_images=0)
    config = config.replace(
        tokenizer=dataclasses.replace(config.tokenizer, kind="sentencepiece", vocab_size=120),
        decode=dataclasses.replace(config.decode, beam_size=3))
    run = os.path.join(cls.tmp, "run")
    Trainer(config, run, stream=io.StringIO()).train()
    cls.run_dir = RunDir(run)
    cls.saved = export_run(run, max_source_length=MAX_SOURCE, warmup=False)
    cls.exports = {q: export_litert(run, max_source_length=MAX_SOURCE, quantization=q)
                   for q in ("float32", "int8")}
    pairs = data.generate_pairs(24, seed=5, split="test", max_length=8)
    cls.references = list(pairs.targets)
    long = " ".join(pairs.sources[:4])
    cls.sentences = list(pairs.sources) + ["", "   ", b"\xff\xfe" + pairs.sources[0].encode(),
                                           long]
    cls.edge = len(pairs.sources)  # index of the first edge case
    cls.answers = {q: litert_translate(path, cls.sentences) for q, path in cls.exports.items()}
    loaded = tf.saved_model.load(cls.saved)
    text = tf.constant([s.encode() if isinstance(s, str) else s for s in cls.sentences])
    cls.greedy = loaded.signatures["serving_default"](text=text)
    cls.beam = loaded.signatures["beam_search"](text=text)
    cls.empty = loaded.signatures["serving_default"](text=tf.constant([], tf.string))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def saved_tokens(self, outputs, i):
    n = int(outputs["target_length"][i])
    return [t.decode() for t in outputs["target_tokens"][i][:n].numpy()]

  def test_export_directory_and_metadata(self):
    path = self.exports["float32"]
    self.assertEqual(os.path.dirname(path), os.path.join(self.run_dir.export_dir, "nmt_litert"))
    for name in (MODEL_FILE, litert_client.METADATA_FILE, CLIENT_FILE,
                 os.path.join("vocab", "tokenizers.json")):
      self.assertTrue(os.path.isfile(os.path.join(path, name)), name)
    with open(os.path.join(path, litert_client.METADATA_FILE), encoding="utf-8") as f:
      metadata = json.load(f)
    self.assertEqual((metadata["max_source_length"], metadata["beam_size"]), (MAX_SOURCE, 3))
    self.assertEqual(sorted(os.listdir(os.path.dirname(path))), ["1", "2"])

  def test_runs_without_tensorflow(self):
    for answer in self.answers.values():
      self.assertNotIn("error", answer, answer.get("error"))
      self.assertFalse(answer["tensorflow"])

  def test_float32_greedy_tokens_equal_saved_model(self):
    translations = self.answers["float32"]["translations"]
    self.assertLen(translations, len(self.sentences))
    for i, t in enumerate(translations):
      self.assertEqual(t["target_tokens"], self.saved_tokens(self.greedy, i), i)
      self.assertEqual(t["text"], self.greedy["translation"][i].numpy().decode(), i)
      self.assertEqual(t["truncated"], bool(self.greedy["truncated"][i]), i)
      self.assertAllClose(t["log_prob"], float(self.greedy["log_prob"][i]), atol=1e-4)
    self.assertNotEqual(translations[0]["text"], "")

  def test_edge_cases_as_saved_model(self):
    translations = self.answers["float32"]["translations"]
    empty, blank, invalid, long = translations[self.edge:]
    for t in (empty, blank):
      self.assertEqual((t["text"], t["log_prob"], t["target_tokens"]), ("", 0.0, []))
    self.assertTrue(long["truncated"])
    self.assertNotEqual(invalid["text"], "")  # and equal to the SavedModel's (test above)
    self.assertEqual(litert_translate(self.exports["float32"], [])["translations"], [])
    self.assertEqual(self.empty["translation"].shape, [0])

  def test_beam_search_equals_saved_model(self):
    answer = litert_translate(self.exports["float32"], self.sentences, beam=True)
    for i, t in enumerate(answer["translations"]):
      expected = [s.decode() for s in self.beam["translation"][i].numpy()]
      lengths = self.beam["target_length"][i].numpy()
      found = [e for e, n in zip(expected, lengths) if n > 0]
      self.assertEqual([t["text"]] + t["alternatives"], found or [""], i)

  def test_quantized_models_translate_as_well(self):
    def bleu(answer):
      hypotheses = [t["text"] for t in answer["translations"][:self.edge]]
      return sacrebleu.corpus_bleu(hypotheses, [self.references]).score

    self.assertGreater(bleu(self.answers["float32"]), 0.0)  # 40 steps: about 1 BLEU
    self.assertLessEqual(abs(bleu(self.answers["int8"]) - bleu(self.answers["float32"])), 0.5)
    sizes = {q: os.path.getsize(os.path.join(p, MODEL_FILE)) for q, p in self.exports.items()}
    self.assertLess(sizes["int8"], sizes["float32"])
