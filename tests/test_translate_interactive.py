"""A target prefix, terminology constraints and word-level confidence through the
Translator, `nmt-tf translate` and the Python API, on tiny runs with word and SentencePiece
vocabularies (untrained, and one trained for the constraints)."""

import dataclasses
import json
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf import data
from nmt_tf import decoding
from nmt_tf.cli import translate as translate_cli
from nmt_tf.inference import Translator
from nmt_tf.inference import confidence
from nmt_tf.special_tokens import UNK_ID
from tests.run_fixtures import make_tiny_run
from tests.test_cli_decode import run_command
from tests.training_fixtures import tiny_train_config

SOURCES = ["the boy helps the king", "a dog", "the girl sees a small cat", "king"]


def write(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in lines)
  return path


class TinyRunsCase(tf.test.TestCase):
  """Two untrained tiny runs, `runs` and `models` by tokenizer kind, and `sources`, a file of
  SOURCES."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.runs = {}
    for kind in ("word", "sentencepiece"):
      cls.runs[kind] = os.path.join(cls.tmp, kind)
      make_tiny_run(cls.runs[kind], tokenizer=kind)
    cls.models = {kind: nmt_tf.load(path) for kind, path in cls.runs.items()}
    cls.sources = write(os.path.join(cls.tmp, "src.txt"), SOURCES)


@pytest.mark.slow  # decodes with two runs through every interface
class PrefixTest(TinyRunsCase):

  def translator(self, kind, **decode):
    model = self.models[kind].translator
    config = dataclasses.replace(model.decode_config, **decode)
    return Translator(model.model, model.source_tokenizer, model.target_tokenizer, config)

  def test_a_prefix_of_the_output_gives_the_output(self):
    model = self.models["word"]
    for beam_size in (1, 3):
      free = model.translate(SOURCES, beam_size=beam_size)
      for k in (1, 2, 4):
        prefixes = [" ".join(t.target_tokens[:min(k, len(t.target_tokens) - 1)]) + " "
                    for t in free]
        forced = model.translate(SOURCES, beam_size=beam_size, prefix=prefixes)
        for a, b in zip(forced, free):
          self.assertEqual(a.text, b.text)
          self.assertAllClose(a.score, b.score, atol=1e-4)
          self.assertAllClose(a.piece_log_probs, b.piece_log_probs, atol=1e-4)

  def test_same_pieces_at_the_ids_level(self):
    translator = self.models["sentencepiece"].translator
    source, _ = translator.source_ids(tf.constant(SOURCES))
    for beam_size in (1, 3):
      free = translator.translate_ids(source, beam_size, 1, False)
      ids = free.ids[:, 0, :3]
      lengths = tf.minimum(free.lengths[:, 0] - 1, 3)
      ids = tf.where(tf.range(3)[tf.newaxis] < lengths[:, tf.newaxis], ids, 0)
      forced = translator.translate_ids(source, beam_size, 1, False,
                                        decoding.Prefix(ids, lengths))
      self.assertAllEqual(forced.ids, free.ids)
      self.assertAllClose(forced.scores, free.scores, atol=1e-4)

  def test_any_prefix_starts_the_output(self):
    prefixes = ["a dog runs ", "ein hund", "", "zwei hunde laufen ueber die"]
    for kind, model in self.models.items():
      for beam_size in (1, 3):
        out = model.translate(SOURCES, beam_size=beam_size, prefix=prefixes)
        for prefix, t in zip(prefixes, out):
          self.assertTrue(t.text.startswith(prefix.strip()), (kind, prefix, t.text))

  def test_a_prefix_inside_a_word_completes_it(self):
    model = self.models["sentencepiece"]
    vocab = model.translator.target_tokenizer
    pieces = [p.decode() for p in vocab.id_to_token(tf.range(4, vocab.vocab_size)).numpy()]
    long_piece = max((p for p in pieces if p.startswith("\u2581")), key=len)
    typed = "la " + long_piece[1:3]  # the start of a word the vocabulary holds whole
    for beam_size in (1, 3):
      out = model.translate(SOURCES, beam_size=beam_size, prefix=[typed] * len(SOURCES))
      for t in out:
        self.assertTrue(t.text.startswith(typed), t.text)
        self.assertTrue(t.words[1].startswith(long_piece[1:3]), t.words)
        # the typed characters are one piece's start, not pieces forced one by one
        self.assertTrue(t.target_tokens[len(vocab.encode("la"))].startswith(
            "\u2581" + long_piece[1:3]), t.target_tokens)

  def test_an_unknown_word_is_shown_as_typed(self):
    out = self.models["word"].translate(SOURCES[:2], prefix=["Xyzzy plugh", "Xyzzy "])
    for t in out:
      self.assertTrue(t.text.startswith("Xyzzy"), t.text)
    self.assertEqual(out[0].target_tokens[:2], ["<unk>", "<unk>"])

  def test_compaction_and_ensembles_agree_with_the_plain_search(self):
    prefixes = ["a dog ", "", "the gi", "king"]
    text = tf.constant(SOURCES)
    for kind in ("word", "sentencepiece"):
      expected = self.translator(kind, compact_batch=False).translate(text, 3, 1, prefixes)
      got = self.translator(kind, compact_batch=True).translate(text, 3, 1, prefixes)
      self.assertAllEqual(got["translation"], expected["translation"])
      self.assertAllClose(got["scores"], expected["scores"], atol=1e-5)
      single = self.models[kind].translate(SOURCES, beam_size=3, prefix=prefixes)
      ensemble = nmt_tf.load(self.runs[kind], checkpoints=[self.runs[kind]] * 2)
      members = ensemble.translate(SOURCES, beam_size=3, prefix=prefixes)
      for a, b in zip(members, single):
        self.assertEqual(a.target_tokens, b.target_tokens)
        self.assertAllClose(a.log_prob, b.log_prob, atol=1e-4)

  def test_confidence(self):
    for kind, model in self.models.items():
      for t in model.translate(SOURCES, beam_size=3):
        self.assertLen(t.piece_log_probs, len(t.target_tokens))
        self.assertAllClose(sum(t.piece_log_probs), t.log_prob, atol=1e-4)
        self.assertAllClose(sum(t.word_log_probs), sum(t.piece_log_probs[:-1]), atol=1e-4)
        if kind == "word":
          self.assertEqual(t.words, t.target_tokens[:-1])
        else:
          self.assertEqual(" ".join(t.words), " ".join(t.text.split()))
    words, log_probs, count = confidence.word_tensors(
        tf.constant([[["\u2581Hu", "nd", "\u2581l", "äuft", "</s>"],
                      ["\u2581a", "</s>", "", "", ""]]]),
        tf.constant([[[-1.0, -0.5, -2.0, -0.25, -0.1], [-1.0, -0.5, 0.0, 0.0, 0.0]]]),
        tf.constant([[5, 2]]), joins_pieces=True)
    self.assertAllEqual(words, [[[b"Hund", b"l\xc3\xa4uft"], [b"a", b""]]])
    self.assertAllClose(log_probs, [[[-1.5, -2.25], [-1.0, 0.0]]])
    self.assertAllEqual(count, [[2, 1]])

  def test_the_command(self):
    prefixes = write(os.path.join(self.tmp, "prefix.txt"), ["a dog ", "", "ein hu", "king"])
    for kind, path in self.runs.items():
      code, out, err = run_command(translate_cli, run_dir=path, input_file=self.sources,
                                   prefix_file=prefixes, output_format="jsonl", beam_size=2)
      self.assertEqual(code, 0, err)
      records = [json.loads(line) for line in out.splitlines()]
      self.assertLen(records, 4)
      for record, prefix in zip(records, ["a dog", "", "ein hu", "king"]):
        self.assertTrue(record["translation"].startswith(prefix), record)
        self.assertLen(record["piece_log_probs"], len(record["pieces"]))
        self.assertAllClose(sum(record["piece_log_probs"]), record["log_prob"], atol=1e-3)
        self.assertLen(record["word_log_probs"], len(record["words"]))
        self.assertIn("alignment", record)
      code, text, err = run_command(translate_cli, run_dir=path, input_file=self.sources,
                                    prefix_file=prefixes, beam_size=2)
      self.assertEqual(code, 0, err)
      self.assertEqual(text.splitlines(), [r["translation"] for r in records])

  def test_bad_prefix_files(self):
    path = self.runs["word"]
    short = write(os.path.join(self.tmp, "short.txt"), ["a dog"])
    code, out, err = run_command(translate_cli, run_dir=path, input_file=self.sources,
                                 prefix_file=short)
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err, f"error: --prefix_file {short} has 1 lines and the input 4; expected "
                     "one prefix (an empty line for none) per input line.\n")
    long_line = write(os.path.join(self.tmp, "long.txt"), ["", "a " * 60, "", ""])
    code, out, err = run_command(translate_cli, run_dir=path, input_file=self.sources,
                                 prefix_file=long_line)
    self.assertEqual((code, out), (2, ""))
    self.assertEqual(err, "error: --prefix_file line 2 has 60 target pieces; "
                     "decode.max_length=40 holds at most 39 and EOS (raise "
                     "decode.max_length).\n")
    code, _, err = run_command(translate_cli, run_dir=path, input_file=self.sources,
                               prefix_file=os.path.join(self.tmp, "missing.txt"))
    self.assertEqual(code, 2)
    self.assertLen(err.splitlines(), 1)

  def test_the_python_api_checks_its_arguments(self):
    model = self.models["word"]
    with self.assertRaisesRegex(ValueError, "expected one per sentence"):
      model.translate(SOURCES, prefix=["a"])
    with self.assertRaisesRegex(ValueError, "expected one per sentence"):
      model.translate(SOURCES[0], prefix=["a"])
    with self.assertRaisesRegex(TypeError, r"prefix\[0\]"):
      model.translate(SOURCES[:1], prefix=[3])
    self.assertTrue(model.translate("a dog", prefix="the ").text.startswith("the"))


@pytest.mark.slow  # decodes with two runs through every interface
class ConstraintsTest(TinyRunsCase):
  """Terminology constraints on untrained runs: the command, the API and bad input."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tokenizer = cls.models["word"].translator.target_tokenizer
    cls.words = [w.decode() for w in tokenizer.id_to_token(tf.range(10, 30)).numpy()]

  def test_every_phrase_appears(self):
    w = self.words
    constraints = [[w[0]], [w[1] + " " + w[2], w[3]], [], [w[4], w[4]]]
    for kind, model in self.models.items():
      for beam_size in (1, 3):
        out = model.translate(SOURCES, beam_size=beam_size, constraints=constraints)
        for t, phrases in zip(out, constraints):
          for phrase in phrases:
            self.assertIn(phrase, t.text, (kind, beam_size, t.text))
          self.assertGreaterEqual(t.text.count(w[4]), 2 if phrases == [w[4], w[4]] else 0)
      both = model.translate(SOURCES[:2], beam_size=3, prefix=["a ", ""],
                             constraints=constraints[:2])
      self.assertTrue(both[0].text.startswith("a"))
      self.assertIn(w[0], both[0].text)

  def test_a_shortlist_keeps_the_prefix_and_the_phrases(self):
    w = self.words
    for kind, path in self.runs.items():
      model = nmt_tf.load(path, shortlist=2)
      out = model.translate(SOURCES, beam_size=3, prefix=["a dog ", "", "", w[5][:2]],
                            constraints=[[], [w[0]], [w[1] + " " + w[2]], []])
      self.assertTrue(out[0].text.startswith("a dog"), out[0].text)
      self.assertIn(w[0], out[1].text)
      self.assertIn(w[1] + " " + w[2], out[2].text)
      self.assertTrue(out[3].text.startswith(w[5][:2]), out[3].text)

  def test_the_command(self):
    w = self.words
    path = write(os.path.join(self.tmp, "constraints.txt"),
                 [json.dumps([w[0]]), "", "[]", json.dumps([w[1], w[2] + " " + w[3]])])
    code, out, err = run_command(translate_cli, run_dir=self.runs["word"],
                                 input_file=self.sources, constraints_file=path, beam_size=3)
    self.assertEqual(code, 0, err)
    lines = out.splitlines()
    self.assertLen(lines, 4)
    self.assertIn(w[0], lines[0])
    self.assertIn(w[1], lines[3])
    self.assertIn(w[2] + " " + w[3], lines[3])

  def test_bad_constraints(self):
    run = self.runs["word"]
    cases = (
        ("not json", "error: --constraints_file line 1: not JSON (Expecting value); write a "
         'list of phrases such as ["ein Hund", "Ball"].'),
        ('{"a": 1}', "error: --constraints_file line 1: '{\"a\": 1}' is not a JSON list of "
         'strings; write a list such as ["ein Hund", "Ball"].'),
        ('["zzzunknownzzz"]', "error: --constraints_file line 1: constraint 'zzzunknownzzz' "
         "has characters or words the target vocabulary lacks, which no translation can "
         "contain; spell it with the vocabulary's words or drop it."),
        (json.dumps([" ".join(self.words[:5])] * 8), "error: --constraints_file line 1: its "
         "constraints have 40 target pieces, which with EOS do not fit decode.max_length=40; "
         "drop some or raise decode.max_length."),
        ('[""]', "error: --constraints_file line 1: constraint '' is not a non-empty string; "
         "give each phrase as a string."),
    )
    for row, message in cases:
      path = write(os.path.join(self.tmp, "bad.txt"), [row, "", "", ""])
      code, out, err = run_command(translate_cli, run_dir=run, input_file=self.sources,
                                   constraints_file=path)
      self.assertEqual((code, out, err), (2, "", message + "\n"), row)
    short = write(os.path.join(self.tmp, "short.txt"), ["[]"])
    code, _, err = run_command(translate_cli, run_dir=run, input_file=self.sources,
                               constraints_file=short)
    self.assertEqual(code, 2)
    self.assertIn("has 1 lines and the input 4", err)
    model = self.models["word"]
    with self.assertRaisesRegex(ValueError, "a list of phrases per sentence"):
      model.translate(SOURCES, constraints=["a"] * 4)
    with self.assertRaisesRegex(ValueError, "not a non-empty string"):
      model.translate(SOURCES[:1], constraints=[[3]])


@pytest.mark.slow  # trains a tiny model
class TrainedConstraintsTest(tf.test.TestCase):
  """A tiny trained model: phrases drawn from the references appear in every output."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = os.path.join(tempfile.mkdtemp(), "trained")
    nmt_tf.train(tiny_train_config(steps=60), cls.run_dir)
    cls.model = nmt_tf.load(cls.run_dir)

  def test_reference_phrases_appear_in_every_output(self):
    test = data.load_corpus(self.model.config.data)["test"]
    tokenizer = self.model.translator.target_tokenizer
    rng = np.random.default_rng(0)
    constraints = []
    for reference in test.targets:  # 1-2 known words of the reference, as Post and Vilar
      ids = [i for i in tokenizer.encode(reference) if i != UNK_ID]
      start = int(rng.integers(0, max(len(ids) - 1, 1)))
      constraints.append([tokenizer.decode(ids[start:start + int(rng.integers(1, 3))])])
    for beam_size in (1, 4):
      out = self.model.translate(list(test.sources), beam_size=beam_size,
                                 constraints=constraints)
      for t, phrases in zip(out, constraints):
        self.assertIn(phrases[0], t.text, (beam_size, t.text))


if __name__ == "__main__":
  tf.test.main()
