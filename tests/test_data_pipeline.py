"""tf.data pipeline: batch format, length filter, bucketing budget, order, errors."""

import numpy as np
import tensorflow as tf

from nmt_tf import data
from nmt_tf import special_tokens

EOS, BOS = special_tokens.EOS_ID, special_tokens.BOS_ID


class PipelineTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.text = data.generate_pairs(600, seed=5)
    cls.vocab_src = data.WordTokenizer.build(cls.text.sources).vocab
    cls.vocab_tgt = data.WordTokenizer.build(cls.text.targets).vocab

  def setUp(self):
    super().setUp()
    self.src_tok = data.WordTokenizer(self.vocab_src)
    self.tgt_tok = data.WordTokenizer(self.vocab_tgt)

  def _train(self, text=None, **kwargs):
    config = data.PipelineConfig(**{"max_source_len": 30, "max_target_len": 30,
                                    "batch_tokens": 256, **kwargs})
    return data.make_train_dataset(text or self.text, self.src_tok, self.tgt_tok, config)

  def test_eval_batches_match_design(self):
    config = data.PipelineConfig(eval_batch_size=4)
    batch = next(iter(data.make_eval_dataset(self.text, self.src_tok, self.tgt_tok, config,
                                             include_text=True)))
    for key in ("source", "target_in", "target_out"):
      self.assertEqual(batch[key].dtype, tf.int32)
      self.assertEqual(batch[key].shape[0], 4)
    src_ids = self.src_tok.encode(self.text.sources[0])
    tgt_ids = self.tgt_tok.encode(self.text.targets[0])
    row = batch["source"][0].numpy().tolist()
    self.assertEqual(row[:len(src_ids) + 1], src_ids + [EOS])
    self.assertEqual(set(row[len(src_ids) + 1:]), {0} if len(row) > len(src_ids) + 1 else set())
    self.assertEqual(batch["target_in"][0].numpy().tolist()[:len(tgt_ids) + 1],
                     [BOS] + tgt_ids)
    self.assertEqual(batch["target_out"][0].numpy().tolist()[:len(tgt_ids) + 1],
                     tgt_ids + [EOS])
    self.assertEqual(batch["source_text"][0].numpy().decode(), self.text.sources[0])
    self.assertAllEqual(self.tgt_tok.detokenize(batch["target_out"])[0],
                        self.text.targets[0].encode())

  def test_bucketing_keeps_batches_under_token_budget(self):
    pairs = 0
    for batch in self._train(batch_tokens=200):
      length = max(batch["source"].shape[1], batch["target_in"].shape[1])
      self.assertLessEqual(batch["source"].shape[0] * length, 200)
      self.assertAllEqual(batch["target_in"] != 0, batch["target_out"] != 0)
      pairs += batch["source"].shape[0]
    stats = data.filter_stats(self.text, self.src_tok, self.tgt_tok,
                              data.PipelineConfig(max_source_len=30, max_target_len=30))
    self.assertEqual(pairs, stats.kept)
    self.assertEqual(stats.total, 600)
    self.assertGreater(stats.source_too_long + stats.target_too_long, 0)

  def test_length_filter(self):
    for batch in self._train(max_source_len=12, max_target_len=10):
      self.assertLessEqual(batch["source"].shape[1], 13)
      self.assertLessEqual(batch["target_out"].shape[1], 11)

  def test_fixed_batch_size(self):
    sizes = [b["source"].shape[0] for b in self._train(batch_size=16)]
    self.assertLessEqual(max(sizes), 16)
    self.assertGreater(len(sizes), 1)

  def test_order_deterministic_under_seed(self):
    small = data.ParallelText(self.text.sources[:200], self.text.targets[:200])

    def epochs(seed):
      config = data.PipelineConfig(max_source_len=30, max_target_len=30, batch_tokens=256,
                                   seed=seed)
      ds = data.make_train_dataset(small, self.src_tok, self.tgt_tok, config, check=False)
      return [[b["source"].numpy().tolist() for b in ds] for _ in range(2)]
    first, again, other = epochs(1), epochs(1), epochs(2)
    self.assertEqual(first, again)
    self.assertNotEqual(first[0], first[1])  # reshuffled each epoch
    self.assertNotEqual(first[0], other[0])

  def test_eval_keeps_every_pair_in_order(self):
    config = data.PipelineConfig(eval_batch_size=64, max_source_len=5)
    texts = [t.decode() for b in data.make_eval_dataset(
        self.text, self.src_tok, self.tgt_tok, config, include_text=True)
             for t in b["source_text"].numpy()]
    self.assertEqual(texts, self.text.sources)

  def test_tf_data_source(self):
    ds = tf.data.Dataset.from_tensor_slices((self.text.sources, self.text.targets))
    n = sum(b["source"].shape[0] for b in self._train(text=ds))
    self.assertBetween(n, 100, 600)

  def test_empty_after_filter_error(self):
    with self.assertRaisesRegex(
        data.DataError, r"length filter \(max_source_len=2, max_target_len=30\) removed "
        r"all 600 .*raise max_source_len/max_target_len or set them to 0"):
      self._train(max_source_len=2)

  def test_budget_smaller_than_longest_pair(self):
    with self.assertRaisesRegex(data.DataError, "batch_tokens=20, less than the longest"):
      self._train(batch_tokens=20)

  def test_bucket_sizes(self):
    boundaries, sizes = data.batching.bucket_sizes(
        31, data.PipelineConfig(batch_tokens=300, bucket_width=10))
    self.assertEqual(boundaries, [11, 21, 31, 32])
    self.assertEqual(sizes, [30, 15, 10, 9, 1])
    for bound, size in zip(boundaries, sizes):
      self.assertLessEqual((bound - 1) * size, 300)

  def test_config_errors(self):
    with self.assertRaisesRegex(data.DataError, "Received batch_tokens=0"):
      data.PipelineConfig(batch_tokens=0)
    with self.assertRaisesRegex(data.DataError, r"Unknown pipeline config keys \['maxlen'\]"):
      data.PipelineConfig.from_dict({"maxlen": 3})

  def test_export_helpers_match_pipeline(self):
    ids = data.encode_source(self.src_tok, tf.constant(["the dog sees a cat"]))
    expected = self.src_tok.encode("the dog sees a cat") + [EOS]
    self.assertEqual(ids.to_list(), [expected])
    target_in, target_out = data.encode_target(self.tgt_tok, tf.constant(["la feli"]))
    np.testing.assert_array_equal(target_in.to_list()[0][1:], target_out.to_list()[0][:-1])


if __name__ == "__main__":
  tf.test.main()
