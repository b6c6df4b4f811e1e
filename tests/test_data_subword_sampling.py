"""Subword regularization (data/subword_sampling.py): drawn segmentations of the training pairs,
the same for the same seed, and errors for what cannot sample."""

import tensorflow as tf

from nmt_tf import data
from nmt_tf import special_tokens
from nmt_tf.data import subword_sampling
from nmt_tf.experiment.config import ExperimentConfig
from nmt_tf.models.config import ConfigError
from nmt_tf.training import data_order

EOS, BOS = special_tokens.EOS_ID, special_tokens.BOS_ID


def _rows(dataset):
  return [{k: v.numpy().tolist() for k, v in row.items()} for row in dataset]


def _batches(dataset):
  return [{k: v.numpy().tolist() for k, v in batch.items()} for batch in dataset]


class SubwordSamplingTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.text = data.generate_pairs(300, seed=5)
    cls.src_tok = data.SentencePieceTokenizer.train(cls.text.sources, vocab_size=60)
    cls.tgt_tok = data.SentencePieceTokenizer.train(cls.text.targets, vocab_size=60)

  def _config(self, **kwargs):
    return data.PipelineConfig(**{"max_source_len": 80, "max_target_len": 80,
                                  "batch_tokens": 400, "subword_alpha": 0.1, **kwargs})

  def test_rows_are_segmentations_of_their_pairs(self):
    rows = _rows(subword_sampling.sampled_rows(self.text, self.src_tok, self.tgt_tok,
                                               self._config()))
    self.assertLen(rows, len(self.text))
    changed = 0
    for row, source, target in zip(rows, self.text.sources, self.text.targets):
      self.assertEqual(row["source"][-1], EOS)
      self.assertEqual(row["target_in"], [BOS] + row["target_out"][:-1])
      self.assertEqual(row["target_out"][-1], EOS)
      self.assertEqual(self.src_tok.decode(row["source"][:-1]), source)
      self.assertEqual(self.tgt_tok.decode(row["target_out"][:-1]), target)
      changed += row["source"][:-1] != self.src_tok.encode(source)
    self.assertGreater(changed, len(self.text) // 2)  # alpha 0.1 over all segmentations

  def test_reversed_source_keeps_eos_last(self):
    forward = _rows(subword_sampling.sampled_rows(self.text, self.src_tok, self.tgt_tok,
                                                  self._config()))
    reverse = _rows(subword_sampling.sampled_rows(self.text, self.src_tok, self.tgt_tok,
                                                  self._config(reverse_source=True)))
    for f, r in zip(forward, reverse):
      self.assertEqual(r["source"], f["source"][:-1][::-1] + [EOS])
      self.assertEqual(r["target_out"], f["target_out"])

  def test_seed_fixes_the_draw(self):
    first = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                             self._config(seed=3)))
    again = _batches(data.make_train_dataset(self.text, self.src_tok, self.tgt_tok,
                                             self._config(seed=3)))
    self.assertEqual(first, again)
    rows = [_rows(subword_sampling.sampled_rows(self.text, self.src_tok, self.tgt_tok,
                                                self._config(seed=seed))) for seed in (3, 4)]
    self.assertNotEqual([r["source"] for r in rows[0]], [r["source"] for r in rows[1]])
    self.assertNotEqual([r["target_out"] for r in rows[0]], [r["target_out"] for r in rows[1]])
    # The source and target draws of one seed use different random streams.
    self.assertNotEqual(*subword_sampling.side_seeds(3))
    self.assertNotIn(subword_sampling.side_seeds(3)[1], subword_sampling.side_seeds(4))

  def test_restored_epoch_skips_to_the_same_batches(self):
    order = data_order.batch_order(self.text, self.src_tok, self.tgt_tok, self._config())
    whole = _batches(order.epoch(2))
    self.assertGreater(len(whole), 4)
    restored = data_order.batch_order(self.text, self.src_tok, self.tgt_tok, self._config())
    self.assertEqual(_batches(restored.epoch(2, skip=3)), whole[3:])
    self.assertNotEqual(_batches(order.epoch(3)), whole)

  def test_long_draws_are_filtered_at_the_limits(self):
    config = self._config(max_source_len=30, max_target_len=30, subword_alpha=0.01)
    for batch in data.make_train_dataset(self.text, self.src_tok, self.tgt_tok, config):
      lengths = tf.reduce_sum(tf.cast(batch["source"] > 0, tf.int32), axis=1) - 1
      self.assertLessEqual(int(tf.reduce_max(lengths)), 30)

  def test_what_cannot_sample_is_a_one_line_error(self):
    words = data.WordTokenizer.build(self.text.sources)
    with self.assertRaisesRegex(data.DataError, "SentencePiece tokenizers.*subword_alpha=0"):
      data.make_train_dataset(self.text, words, self.tgt_tok, self._config())
    with self.assertRaisesRegex(data.DataError, "SentencePiece tokenizers"):
      data_order.batch_order(self.text, self.src_tok, words, self._config())
    pairs = tf.data.Dataset.from_tensor_slices((self.text.sources, self.text.targets))
    with self.assertRaisesRegex(data.DataError, "read into memory.*subword_alpha=0"):
      data_order.batch_order(pairs, self.src_tok, self.tgt_tok, self._config())
    for bad in ({"subword_alpha": -0.1}, {"subword_alpha": "0.1"}, {"subword_nbest": 0},
                {"subword_nbest": 1}, {"subword_nbest": -2}):
      with self.assertRaisesRegex(data.DataError, "subword_"):
        self._config(**bad)
    # The run's config refuses it with word vocabularies, before anything is built.
    with self.assertRaisesRegex(ConfigError, "subword_alpha=0.1 with tokenizer.kind='word'"):
      ExperimentConfig.from_dict({"tokenizer": {"kind": "word"},
                                  "pipeline": {"subword_alpha": 0.1}})
    self.assertEqual(ExperimentConfig.from_dict(
        {"pipeline": {"subword_alpha": 0.1, "subword_nbest": 64}}).pipeline.subword_nbest, 64)
    # Off: nothing is checked, word tokenizers batch as before.
    self.assertTrue(_batches(data.make_train_dataset(
        self.text, words, data.WordTokenizer.build(self.text.targets),
        self._config(subword_alpha=0))))


if __name__ == "__main__":
  tf.test.main()
