"""nmt_tf.evaluation.significance against sacrebleu's own paired bootstrap test."""

import os
import random
import tempfile

import sacrebleu
from sacrebleu.significance import PairedTest
import tensorflow as tf

from nmt_tf.evaluation import significance
from nmt_tf.evaluation.scoring import corpus_bleu, corpus_chrf

WORDS = "a man woman dog runs sits on the grass in red blue street two people".split()


def _corpus(seed, count=60, noise=0.3):
  """(references, hypotheses with about `noise` of their words replaced)."""
  rng = random.Random(seed)
  refs, hyps = [], []
  for _ in range(count):
    ref = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
    hyp = [w if rng.random() > noise else rng.choice(WORDS) for w in ref]
    refs.append(" ".join(ref) + " .")
    hyps.append(" ".join(hyp[:rng.randint(2, len(hyp))]) + " .")
  return refs, hyps


class SignificanceTest(tf.test.TestCase):

  def test_corpus_scores_from_statistics(self):
    refs, hyps = _corpus(1)
    stats = significance.sentence_statistics(hyps, refs)
    self.assertLen(stats["bleu"], len(refs))
    self.assertAllClose(significance.corpus_score(stats, "bleu"), corpus_bleu(hyps, refs).score)
    self.assertAllClose(significance.corpus_score(stats, "chrf"), corpus_chrf(hyps, refs).score)
    self.assertEqual(stats["bleu_signature"], corpus_bleu(hyps, refs).signature)
    self.assertEqual(stats["chrf_signature"], corpus_chrf(hyps, refs).signature)
    self.assertAllClose(significance.length_ratio(stats), corpus_bleu(hyps, refs).length_ratio)
    self.assertLess(significance.length_ratio(stats), 1.0)  # _corpus shortens hypotheses
    self.assertAllClose(significance.length_ratio(significance.sentence_statistics(refs, refs)),
                        1.0)

  def test_paired_bootstrap_is_sacrebleus(self):
    """The same scores and p-values as `sacrebleu ref -i base sys --paired-bs` (seed 12345)."""
    refs, base = _corpus(2, noise=0.4)
    _, system = _corpus(2, noise=0.2)
    ours = significance.paired_bootstrap(significance.sentence_statistics(base, refs),
                                         significance.sentence_statistics(system, refs))
    metrics = {"BLEU": sacrebleu.metrics.BLEU(), "chrF2": sacrebleu.metrics.CHRF()}
    _, theirs = PairedTest([("base", base), ("system", system)], metrics, [refs],
                           test_type="bs", n_samples=1000)()
    for name, key in (("BLEU", "bleu"), ("chrF2", "chrf")):
      baseline_result, system_result = theirs[name]
      self.assertAllClose(ours[key]["baseline"], baseline_result.score)
      self.assertAllClose(ours[key]["system"], system_result.score)
      self.assertAllClose(ours[key]["p"], system_result.p_value)
    self.assertLess(ours["bleu"]["p"], 1.0)

  def test_files_and_errors(self):
    refs, hyps = _corpus(3, count=10)
    stats = significance.sentence_statistics(hyps, refs)
    path = os.path.join(tempfile.mkdtemp(), significance.STATS_FILE)
    self.assertIsNone(significance.read_statistics(path))
    significance.write_statistics(path, stats)
    self.assertEqual(significance.read_statistics(path), stats)
    with open(path, encoding="utf-8") as f:
      self.assertNotIn("\n", f.read())  # one line: a row's largest files stay small
    with self.assertRaisesRegex(ValueError, "one hypothesis per reference line"):
      significance.sentence_statistics(hyps[:-1], refs)
    fewer = significance.sentence_statistics(hyps[:-1], refs[:-1])
    with self.assertRaisesRegex(ValueError, "expected the same test set"):
      significance.paired_bootstrap(stats, fewer)
    other = dict(stats, bleu_signature="nrefs:1|tok:intl")
    with self.assertRaisesRegex(ValueError, "different signatures"):
      significance.paired_bootstrap(stats, other)


if __name__ == "__main__":
  tf.test.main()
