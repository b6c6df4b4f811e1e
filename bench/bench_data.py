"""Throughput of the training pipeline on Multi30k train with an 8k SentencePiece.

Usage: .venv/bin/python bench/bench_data.py [--pair de-en] [--epochs 2] [--vocab_size 8000]
    [--subword_alpha 0.1 --subword_nbest 64]
Prints one JSON object: sentence pairs/s and target tokens/s over the timed epochs (the
first epoch tokenizes, later ones read the in-memory cache), plus the setup times. With
--subword_alpha > 0 (subword regularization) every epoch draws the segmentations of all its
pairs before its first batch, as in training, instead of reading the cache.
"""

import json
import os
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nmt_tf import data  # pylint: disable=g-import-not-at-top

flags.DEFINE_string("pair", "de-en", "Multi30k language pair.")
flags.DEFINE_integer("epochs", 2, "Epochs to iterate.")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size per side.")
flags.DEFINE_integer("batch_tokens", 4096, "Token budget per batch.")
flags.DEFINE_float("subword_alpha", 0.0, "pipeline.subword_alpha (0: no sampling).")
flags.DEFINE_integer("subword_nbest", -1, "pipeline.subword_nbest.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  start = time.perf_counter()
  corpus = data.load_corpus(f"multi30k/{FLAGS.pair}")
  load_s = time.perf_counter() - start
  with tempfile.TemporaryDirectory() as run_dir:
    start = time.perf_counter()
    src_tok, tgt_tok = data.load_or_train_tokenizers(
        run_dir, data.TokenizerConfig(vocab_size=FLAGS.vocab_size), corpus["train"])
    train_tok_s = time.perf_counter() - start
    config = data.PipelineConfig(max_source_len=50, max_target_len=50,
                                 batch_tokens=FLAGS.batch_tokens,
                                 subword_alpha=FLAGS.subword_alpha,
                                 subword_nbest=FLAGS.subword_nbest)
    start = time.perf_counter()
    ds = data.make_train_dataset(corpus["train"], src_tok, tgt_tok, config)
    build_s = time.perf_counter() - start
    epochs = []
    for _ in range(FLAGS.epochs):
      pairs = tokens = batches = 0
      start = time.perf_counter()
      for batch in ds:
        pairs += int(batch["target_out"].shape[0])
        tokens += int(_count_nonzero(batch["target_out"]))
        batches += 1
      seconds = time.perf_counter() - start
      epochs.append({"pairs": pairs, "target_tokens": tokens, "batches": batches,
                     "seconds": round(seconds, 3)})
  total_s = sum(e["seconds"] for e in epochs)
  print(json.dumps({
      "corpus": f"multi30k/{FLAGS.pair} train", "vocab_size": FLAGS.vocab_size,
      "batch_tokens": FLAGS.batch_tokens, "epochs": epochs,
      "pairs_per_s": round(sum(e["pairs"] for e in epochs) / total_s),
      "target_tokens_per_s": round(sum(e["target_tokens"] for e in epochs) / total_s),
      "first_epoch_pairs_per_s": round(epochs[0]["pairs"] / epochs[0]["seconds"]),
      "setup_seconds": {"load_corpus": round(load_s, 2),
                        "train_sentencepiece": round(train_tok_s, 2),
                        "build_pipeline_with_filter_stats": round(build_s, 2)},
  }, indent=2))


def _count_nonzero(x):
  return (x.numpy() != 0).sum()


if __name__ == "__main__":
  app.run(main)
