"""Seeded segmentation draws (data/segmentation_draws.py): the same in another process, drawn
from P(x)^alpha over the n best or the whole lattice, BPE-dropout, and the model's unknown,
byte and user-defined pieces."""

import collections
import io
import json
import math
import os
import subprocess
import sys

import pytest
import sentencepiece as spm
import tensorflow as tf

from nmt_tf import data
from nmt_tf import special_tokens
from nmt_tf.data import segmentation_draws

_DRAW_IN_A_NEW_PROCESS = """
import json, sys
import sentencepiece as spm
from nmt_tf.data import segmentation_draws
proto = open(sys.argv[1], "rb").read()
texts = json.loads(sys.argv[2])
draws = segmentation_draws.SegmentationDraws(proto, spm.SentencePieceProcessor(model_proto=proto))
print(json.dumps([draws.sample(texts, 7, 0.1, nbest) for nbest in (-1, 64)]))
"""


def _train(texts, model_type, vocab_size, **kwargs):
  """A SentencePiece model with the project's reserved pieces and ``kwargs`` on top."""
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
      model_type=model_type, hard_vocab_limit=False, minloglevel=2,
      pad_id=special_tokens.PAD_ID, unk_id=special_tokens.UNK_ID,
      bos_id=special_tokens.BOS_ID, eos_id=special_tokens.EOS_ID,
      pad_piece=special_tokens.PAD, unk_piece=special_tokens.UNK,
      bos_piece=special_tokens.BOS, eos_piece=special_tokens.EOS, **kwargs)
  return model.getvalue()


class SegmentationDrawsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.texts = data.generate_pairs(300, seed=5).sources
    cls.unigram = data.SentencePieceTokenizer.train(cls.texts, vocab_size=80)
    cls.bpe = data.SentencePieceTokenizer.train(cls.texts, vocab_size=80, model_type="bpe")

  def _draws(self, tokenizer):
    return segmentation_draws.SegmentationDraws(tokenizer._proto,  # pylint: disable=protected-access
                                                tokenizer._processor)  # pylint: disable=protected-access

  def _log_prob(self, tokenizer, ids):
    return sum(tokenizer._processor.get_score(i) for i in ids)  # pylint: disable=protected-access

  @pytest.mark.slow  # starts a process
  def test_another_process_draws_the_same_segmentations(self):
    texts = self.texts[:40]
    path = os.path.join(self.get_temp_dir(), "unigram.model")
    with open(path, "wb") as f:
      f.write(self.unigram._proto)  # pylint: disable=protected-access
    here = [self.unigram.sample(texts, 7, 0.1, nbest) for nbest in (-1, 64)]
    there = subprocess.run([sys.executable, "-c", _DRAW_IN_A_NEW_PROCESS, path,
                            json.dumps(texts)], check=True, capture_output=True, text=True)
    self.assertEqual(json.loads(there.stdout), here)
    self.assertNotEqual(here[0], [self.unigram.encode(t) for t in texts])  # drawn, not the best
    self.assertNotEqual(here[0], self.unigram.sample(texts, 8, 0.1))  # another seed, others

  def test_lattice_draws_follow_p_alpha_over_all_segmentations(self):
    word, alpha, count = self.texts[0].split()[1], 0.5, 4000
    processor = self.unigram._processor  # pylint: disable=protected-access
    every = processor.nbest_encode(word, nbest_size=512, out_type=int)  # all of a short word
    self.assertLess(len(every), 512)
    weights = [math.exp(alpha * self._log_prob(self.unigram, ids)) for ids in every]
    expected = {tuple(ids): w / sum(weights) for ids, w in zip(every, weights)}
    drawn = collections.Counter(map(tuple, self.unigram.sample([word] * count, 3, alpha)))
    self.assertContainsSubset(drawn, expected)
    for ids, p in expected.items():
      self.assertNear(drawn[ids] / count, p, 4 * math.sqrt(p * (1 - p) / count) + 1e-3)
    # Over the 3 best only: the same weights, renormalized among them.
    best = collections.Counter(map(tuple, self.unigram.sample([word] * count, 3, alpha, 3)))
    top = sorted(expected, key=expected.get, reverse=True)[:3]
    self.assertContainsSubset(best, top)
    for ids in top:
      p = expected[ids] / sum(expected[t] for t in top)
      self.assertNear(best[ids] / count, p, 4 * math.sqrt(p * (1 - p) / count) + 1e-3)

  def test_a_large_alpha_draws_the_best_segmentation(self):
    best = [self.unigram.encode(t) for t in self.texts]
    for nbest in (-1, 8):
      for ids, viterbi in zip(self.unigram.sample(self.texts, 1, 1e4, nbest), best):
        self.assertNear(self._log_prob(self.unigram, ids), self._log_prob(self.unigram, viterbi),
                        1e-3)

  def test_bpe_dropout_drops_merges_with_probability_alpha(self):
    self.assertEqual(self.bpe.sample(self.texts, 1, 0.0), [self.bpe.encode(t) for t in self.texts])
    processor = self.bpe._processor  # pylint: disable=protected-access
    self.assertEqual([len(ids) for ids in self.bpe.sample(self.texts, 1, 1.0)],
                     [len(s) for s in processor.normalize(self.texts)])  # all dropped: chars
    lengths = [sum(map(len, self.bpe.sample(self.texts, 1, a))) for a in (0.0, 0.1, 0.5)]
    self.assertLess(lengths[0], lengths[1])
    self.assertLess(lengths[1], lengths[2])

  def test_unknown_byte_and_user_defined_pieces_are_the_encoders(self):
    texts = self.texts + ["ein Zebra mit <sep> Ω"]  # Z, Ω: unseen; <sep>: user-defined
    for model_type in ("unigram", "bpe"):
      for byte_fallback in (False, True):
        proto = _train(self.texts, model_type, 400, byte_fallback=byte_fallback,
                       user_defined_symbols=["<sep>"])
        processor = spm.SentencePieceProcessor(model_proto=proto)
        draws = segmentation_draws.SegmentationDraws(proto, processor)
        alpha = 0.0 if model_type == "bpe" else 1e4  # no merge dropped; the best segmentation
        drawn = draws.sample(texts, 1, alpha)
        self.assertEqual(drawn, processor.encode(texts, out_type=int),
                         msg=f"{model_type}, byte_fallback={byte_fallback}")
        self.assertEqual(processor.decode(drawn[-1]),
                         "ein Zebra mit <sep> Ω" if byte_fallback else "ein  ⁇ ebra mit <sep>  ⁇ ")
