"""Length-bucket BLEU, the UNK split, the length plot and the alignment helpers."""

import numpy as np
import tensorflow as tf

from nmt_tf.data import WordTokenizer
from nmt_tf.evaluation import analysis
from nmt_tf.evaluation.length_plot import length_bleu_png, plotted
from nmt_tf.evaluation.scoring import corpus_bleu
from nmt_tf.inference import alignments
from nmt_tf.special_tokens import EOS_ID, UNK_ID


class AnalysisTest(tf.test.TestCase):

  def test_bleu_by_length(self):
    sources = ["a b", "a b c d e", "a", "a b c d e f g"]
    hyps = ["the cat sat on the mat", "x y z", "the dog", "a b c d e"]
    refs = ["the cat sat on the mat", "p q r", "the dog", "a b c d e"]
    buckets = analysis.bleu_by_length(sources, hyps, refs, width=3)
    self.assertEqual([(b.low, b.high, b.count) for b in buckets],
                     [(0, 2, 2), (3, 5, 1), (6, 8, 1)])
    self.assertAllClose(buckets[0].bleu, corpus_bleu(hyps[::2], refs[::2]).score)
    self.assertEqual(buckets[1].bleu, 0.0)
    self.assertEqual(length_bleu_png(buckets)[:4], b"\x89PNG")  # all too small to draw
    self.assertEqual(length_bleu_png(buckets, min_sentences=1)[:4], b"\x89PNG")
    drawn, left_out = plotted(buckets, min_sentences=2)
    self.assertEqual((drawn, left_out), (buckets[:1], buckets[1:]))
    with self.assertRaisesRegex(ValueError, "width=0"):
      analysis.bleu_by_length(sources, hyps, refs, width=0)
    with self.assertRaisesRegex(ValueError, "equal counts"):
      analysis.bleu_by_length(sources, hyps[:2], refs, width=3)

  def test_bleu_length_ratio_and_brevity_penalty(self):
    # Every n-gram of the hypothesis matches: BLEU is 100 times the brevity penalty
    # exp(1 - 1/ratio), ratio = 6 / 7 hypothesis / reference tokens.
    short = corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat today"])
    self.assertAllClose(short.length_ratio, 6 / 7)
    self.assertAllClose(short.score, 100.0 * np.exp(1.0 - 7 / 6), rtol=1e-6)
    self.assertAllClose(corpus_bleu(["a b c d e"], ["a b c d e"]).length_ratio, 1.0)

  def test_lowercased_bleu_for_published_tables(self):
    hyps, refs = ["The Cat sat on the Mat ."], ["the cat sat on the mat ."]
    cased = corpus_bleu(hyps, refs)
    lowercased = corpus_bleu(hyps, refs, lowercase=True)
    self.assertLess(cased.score, 50.0)
    self.assertAllClose(lowercased.score, 100.0)
    self.assertIn("case:lc", lowercased.signature)
    self.assertIn("tok:13a", lowercased.signature)
    self.assertIn("case:mixed", cased.signature)
    self.assertEqual(lowercased.name, "BLEU (lowercased)")

  def test_unk_split(self):
    src_tok = WordTokenizer.build(["a b c"])
    tgt_tok = WordTokenizer.build(["x y z"])
    sources, refs = ["a b", "a q", "c"], ["x y", "x", "x w"]
    mask = analysis.unk_mask(sources, refs, src_tok, tgt_tok)
    self.assertEqual(mask, [False, True, True])  # q: source OOV; w: reference OOV
    hyps = ["x y", "x", "x"]
    result = analysis.bleu_all_and_no_unk(hyps, refs, mask)
    self.assertEqual(result["no_unk_sentences"], 1)
    self.assertAllClose(result["no_unk"].score, corpus_bleu(hyps[:1], refs[:1]).score)
    self.assertAllClose(result["all"].score, corpus_bleu(hyps, refs).score)


class AlignmentHelpersTest(tf.test.TestCase):

  def test_hard_alignment_and_unk_replacement(self):
    attention = np.array([[0.1, 0.7, 0.2],   # -> source 1
                          [0.2, 0.1, 0.7],   # -> source EOS: no link; UNK -> argmax real = 0
                          [0.6, 0.3, 0.1],   # -> source 0
                          [0.1, 0.1, 0.8]])  # EOS row
    links = alignments.hard_alignment(attention)
    self.assertEqual(alignments.pharaoh(links), "1-0 0-2")
    ids = [7, UNK_ID, UNK_ID, EOS_ID]
    tokens = ["foo", "<unk>", "<unk>", "</s>"]
    replaced = alignments.replace_unknowns(tokens, ids, attention, ["Zorg", "runs", "</s>"])
    self.assertEqual(replaced, ["foo", "Zorg", "Zorg", "</s>"])
    soft = alignments.soft_alignment(attention, ["Zorg", "runs", "</s>"], tokens)
    self.assertEqual(np.array(soft["attention"]).shape, (4, 3))

  def test_argmax_agreement_within_a_window(self):
    reference = np.eye(5)  # a diagonal alignment
    attention = np.eye(5)[[0, 2, 2, 0, 4]]  # argmax 0, 2, 2, 0, 4
    self.assertEqual(alignments.argmax_agreement(attention, reference, window=1), (4, 5))
    self.assertEqual(alignments.argmax_agreement(attention, reference, window=0), (3, 5))
    with self.assertRaisesRegex(ValueError, "expected the same sentence pair's"):
      alignments.argmax_agreement(attention[:4], reference)

  def test_source_tokens_keep_oov_words(self):
    tok = WordTokenizer.build(["a b"])
    self.assertEqual(alignments.source_tokens(tok, "a Zorg, b", 3), ["a", "Zorg", ",", "</s>"])


if __name__ == "__main__":
  tf.test.main()
