"""Tokenizers: round trips, in-graph == Python, special ids, files, SavedModel export."""

import os
import shutil
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from nmt_tf import data
from nmt_tf import special_tokens
from tests.release_fixtures import ROOT
from tests.waits import SAFETY_NET

TEXTS = ["Ein Hund läuft über die Wiese.", "Zwei Männer, (alt) und jung!",
         "the dog sees a cat", "a\u00a0b  c\td"]


def _train_texts():
  text = data.generate_pairs(300, seed=1)
  return text.sources + text.targets + TEXTS * 3


class TokenizerCases:
  """Checks shared by both kinds; subclasses set ``cls.tok`` in setUpClass."""

  tok = None

  def test_special_ids(self):
    for i, token in enumerate(special_tokens.SPECIAL_TOKENS):
      self.assertEqual(self.tok.id_to_token(tf.constant([i])).numpy()[0].decode(), token)

  def test_in_graph_matches_python(self):
    ids = self.tok.tokenize(tf.constant(TEXTS))
    self.assertEqual(ids.dtype, tf.int32)
    self.assertEqual(ids.to_list(), [self.tok.encode(t) for t in TEXTS])
    graph_fn = tf.function(self.tok.tokenize,
                           input_signature=[tf.TensorSpec([None], tf.string)])
    self.assertEqual(graph_fn(tf.constant(TEXTS)).to_list(), ids.to_list())
    decoded = [b.decode() for b in self.tok.detokenize(ids).numpy()]
    self.assertEqual(decoded, [self.tok.decode(i) for i in ids.to_list()])

  def test_round_trip(self):
    text = "the big dog sees a small cat"
    self.assertEqual(self.tok.decode(self.tok.encode(text)), text)
    out = self.tok.detokenize(self.tok.tokenize(tf.constant([text, "a cat"])))
    self.assertAllEqual(out, [b"the big dog sees a small cat", b"a cat"])

  def test_detokenize_strips_specials_and_stops_at_eos(self):
    ids = self.tok.encode("a cat")
    eos, bos, pad = special_tokens.EOS_ID, special_tokens.BOS_ID, special_tokens.PAD_ID
    dense = tf.constant([[bos] + ids + [eos] + ids + [pad],
                         ids + [pad] * (len(ids) + 3)])
    self.assertAllEqual(self.tok.detokenize(dense), [b"a cat", b"a cat"])
    self.assertEqual(self.tok.decode([bos] + ids + [eos] + ids), "a cat")

  def test_save_load(self):
    d = os.path.join(self.get_temp_dir(), self.tok.kind)
    self.tok.save(d, "source")
    loaded = data.Tokenizer.load(d, "source")
    self.assertIsInstance(loaded, type(self.tok))
    self.assertEqual(loaded.vocab_size, self.tok.vocab_size)
    self.assertEqual(loaded.tokenize(tf.constant(TEXTS)).to_list(),
                     self.tok.tokenize(tf.constant(TEXTS)).to_list())


class SentencePieceTest(TokenizerCases, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.proto = data.train_sentencepiece(_train_texts(), vocab_size=150)

  def setUp(self):
    super().setUp()
    self.tok = data.SentencePieceTokenizer(self.proto)

  def test_survives_reseeding_and_keeps_models_apart(self):
    # tf.random.set_seed clears the eager kernel cache; tensorflow-text's kernel-owned model
    # resource died with it ("Resource ... SentencepieceOp ... does not exist"), which broke
    # every SentencePiece training run (the Trainer seeds after loading the tokenizers).
    expected = self.tok.tokenize(tf.constant([TEXTS[0]])).to_list()
    other = data.SentencePieceTokenizer(data.train_sentencepiece(TEXTS * 20, vocab_size=40))
    other_expected = other.tokenize(tf.constant([TEXTS[0]])).to_list()
    self.assertNotEqual(expected, other_expected)
    tf.random.set_seed(1)
    keras.utils.set_random_seed(2)
    self.assertEqual(self.tok.tokenize(tf.constant([TEXTS[0]])).to_list(), expected)
    self.assertEqual(other.tokenize(tf.constant([TEXTS[0]])).to_list(), other_expected)
    twin = data.SentencePieceTokenizer(self.proto)  # same model bytes: same shared resource
    del twin
    self.assertEqual(self.tok.tokenize(tf.constant([TEXTS[0]])).to_list(), expected)

  def test_the_ops_and_graph_of_tensorflow_text(self):
    # sentencepiece_ops.py loads tensorflow-text's op library alone; the results and the
    # graph's ops must be those of tensorflow_text.SentencepieceTokenizer, which an export's
    # server runs (the sentencepiece package breaks some ties otherwise: "10.000").
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    reference = tf_text.SentencepieceTokenizer(model=self.proto, out_type=tf.int32)
    texts = tf.constant(TEXTS + ["", "über 10.000 Euro", "\u65e5\u672c e\u0301", "x" * 300])
    expected = reference.tokenize(texts)
    in_graph = tf.function(self.tok.tokenize)
    for ids in (self.tok.tokenize(texts), in_graph(texts)):
      self.assertEqual(ids.to_list(), expected.to_list())
      self.assertEqual(ids.flat_values.dtype, tf.int32)
    self.assertAllEqual(self.tok._detokenize_real(expected), reference.detokenize(expected))  # pylint: disable=protected-access
    ids = tf.constant([[0, 1, 2], [3, 4, self.tok.vocab_size - 1]])
    self.assertAllEqual(self.tok.id_to_token(ids), reference.id_to_string(ids))
    graph = in_graph.get_concrete_function(texts).graph.as_graph_def()
    self.assertIn("SentencepieceTokenizeOp", {n.op for n in graph.node})
    with self.assertRaisesRegex(ValueError, "expected a vector"):
      self.tok.tokenize(tf.constant([["a"]]))

  @pytest.mark.slow  # starts processes
  def test_the_commands_do_not_import_the_tensorflow_text_package(self):
    # Its import loads twenty op libraries (0.25-0.32 s of every command's start-up).
    tmp = self.get_temp_dir()
    self.tok.save(tmp, "tok")
    program = ("import sys\n"
               "from nmt_tf import cli, data\n"
               "cli.commands()\n"
               f"tok = data.Tokenizer.load({tmp!r}, 'tok')\n"
               "import tensorflow as tf\n"
               f"ids = tf.function(tok.tokenize)(tf.constant([{TEXTS[0]!r}]))\n"
               "print(tok.detokenize(ids).numpy()[0].decode(), 'tensorflow_text' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         cwd=ROOT, timeout=SAFETY_NET, check=True)
    self.assertEqual(out.stdout.strip().splitlines()[-1], f"{TEXTS[0]} False")

  def test_vocab_size_and_bpe(self):
    self.assertBetween(self.tok.vocab_size, 20, 150)
    bpe = data.SentencePieceTokenizer.train(_train_texts(), vocab_size=120,
                                            model_type="bpe")
    self.assertEqual(bpe.decode(bpe.encode(TEXTS[0])), TEXTS[0])

  def test_bad_arguments(self):
    with self.assertRaisesRegex(data.DataError, "model_type='wordpiece'"):
      data.train_sentencepiece(["a b"], 100, model_type="wordpiece")
    with self.assertRaisesRegex(data.DataError, "vocab_size=4"):
      data.train_sentencepiece(["a b"], 4)


class WordTest(TokenizerCases, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tok = data.WordTokenizer.build(_train_texts(), max_size=400)

  def test_cap_unk_and_punctuation(self):
    tok = data.WordTokenizer.build(["b a a c c c", "<s> d"], max_size=6)
    self.assertEqual(tok.vocab[4:], ["c", "a"])
    self.assertEqual(tok.encode("c a b <s>"), [4, 5, 1, 1])
    self.assertEqual(data.WordTokenizer.build(["x, y."]).vocab[4:], [",", ".", "x", "y"])
    self.assertEqual(self.tok.decode(self.tok.encode("Zwei Männer, (alt)")),
                     "Zwei Männer, (alt)")

  def test_detokenize_attaches_punctuation(self):
    texts = ['Er sagt: "Ja!" (laut) [x].', '" a " b " c', "a . . . , b ( ( c"]
    tok = data.WordTokenizer.build(texts)
    ids = tok.tokenize(tf.constant(texts))
    expected = ['Er sagt: "Ja!" (laut) [x].', '"a" b " c', "a..., b ((c"]
    self.assertEqual([tok.decode(i) for i in ids.to_list()], expected)
    self.assertAllEqual(tok.detokenize(ids), [t.encode() for t in expected])
    # Detokenized text tokenizes back to the same ids.
    self.assertEqual(tok.tokenize(tok.detokenize(ids)).to_list(), ids.to_list())
    spaced = data.WordTokenizer(tok.vocab, split_punctuation=False)
    self.assertEqual(spaced.decode(tok.encode("(laut).")), "( laut ) .")  # no attaching
    self.assertEqual(spaced.decode(ids.to_list()[1]), '" a " b " c')

  def test_bad_vocab(self):
    with self.assertRaisesRegex(data.DataError, "expected .*'<pad>'"):
      data.WordTokenizer(["a", "b"])


class TokenizerPairTest(tf.test.TestCase):

  def test_shared_and_separate_saved_in_run_dir(self):
    text = data.generate_pairs(200, seed=2)
    for kind in ("word", "sentencepiece"):
      for shared in (False, True):
        config = data.TokenizerConfig(kind=kind, vocab_size=300, shared=shared)
        run_dir = os.path.join(self.get_temp_dir(), f"{kind}_{shared}")
        src, tgt = data.load_or_train_tokenizers(run_dir, config, text)
        self.assertEqual(src is tgt, shared)
        loaded_src, loaded_tgt = data.load_tokenizers(run_dir)
        self.assertEqual(loaded_src is loaded_tgt, shared)
        self.assertEqual(loaded_tgt.encode(text.targets[0]), tgt.encode(text.targets[0]))
        self.assertEqual(src.decode(src.encode(text.sources[0])), text.sources[0])

  def test_saved_model_strings_in_strings_out(self):
    texts = data.generate_pairs(100, seed=4)
    module = tf.Module()
    module.src = data.SentencePieceTokenizer.train(texts.sources, vocab_size=80)
    module.tgt = data.WordTokenizer.build(texts.targets)
    module.roundtrip = tf.function(
        lambda s: (module.src.detokenize(module.src.tokenize(s)),
                   module.tgt.detokenize(module.tgt.tokenize(s))),
        input_signature=[tf.TensorSpec([None], tf.string)])
    path = os.path.join(self.get_temp_dir(), "saved")
    tf.saved_model.save(module, path)
    reloaded = tf.saved_model.load(path)
    src_out, tgt_out = reloaded.roundtrip(tf.constant(["the dog sees a cat", "la feli"]))
    self.assertAllEqual(src_out, [b"the dog sees a cat", b"la feli"])
    self.assertAllEqual(tgt_out, [b"<unk> <unk> <unk> <unk> <unk>", b"la feli"])

  def test_damaged_files_are_one_line_naming_the_file(self):
    text = data.generate_pairs(100, seed=5)
    fix = "restore it from a backup or retrain the tokenizers in a new --run_dir"
    for kind, model in (("word", "source.vocab"), ("sentencepiece", "source.model")):
      clean = os.path.join(self.get_temp_dir(), f"damaged_{kind}")
      data.load_or_train_tokenizers(clean, data.TokenizerConfig(kind=kind, vocab_size=80),
                                    text)
      damages = [  # (file, new content or None to delete it, expected message)
          ("tokenizers.json", b"", r"tokenizers\.json is empty or not valid JSON \(the file "
           r"has no content\)"),
          ("tokenizers.json", b"{\"source\": ", r"tokenizers\.json is empty or not valid "
           r"JSON \(Expecting value: line 1 column 12 \(char 11\)\)"),
          ("tokenizers.json", b"[]", r"tokenizers\.json is empty or not valid JSON \(a JSON "
           r"list instead of an object\)"),
          ("tokenizers.json", b"{\"source\": \"source\"}", r"tokenizers\.json does not name "
           r"the source and target tokenizers"),
          ("source.json", b"\xff\xfe", r"source\.json is empty or not valid JSON"),
          (model, None, rf"{model} not found \(the \w+ file of .*source\.json\)"),
          (model, b"", rf"{model} is empty"),
          (model, b"\xff" * 40 if kind == "word" else b"not a model",
           rf"{model} is not a valid {kind} tokenizer file \((UnicodeDecodeError|"
           r"RuntimeError): "),
      ]
      for name, content, expected in damages:
        damaged = os.path.join(self.get_temp_dir(), f"copy_{kind}")
        shutil.rmtree(damaged, ignore_errors=True)
        shutil.copytree(clean, damaged)
        if content is None:
          os.remove(os.path.join(damaged, name))
        else:
          with open(os.path.join(damaged, name), "wb") as f:
            f.write(content)
        with self.assertRaises(data.DataError, msg=(kind, name, content)) as raised:
          data.load_tokenizers(damaged)
        message = str(raised.exception)
        self.assertRegex(message, expected)
        self.assertIn(damaged, message)
        self.assertTrue(message.endswith(fix + " (the run's checkpoints need these "
                                         "vocabularies)."), message)
        self.assertNotIn("\n", message)

  def test_config_errors(self):
    with self.assertRaisesRegex(data.DataError, "kind='bert'"):
      data.TokenizerConfig(kind="bert")
    with self.assertRaisesRegex(data.DataError, r"Unknown tokenizer config keys \['size'\]"):
      data.TokenizerConfig.from_dict({"size": 3})
    with self.assertRaisesRegex(data.DataError, "No tokenizers.json"):
      data.load_tokenizers(self.get_temp_dir())


if __name__ == "__main__":
  tf.test.main()
