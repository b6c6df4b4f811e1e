"""Does a shapes captioner look at the shape it names? Prints, for the test images of a run
trained on the built-in shapes set (`--config=shapes:...`), the share of the words naming the
first and the second shape whose attention argmax lies on that shape's cells
(nmt_tf/evaluation/shape_attention.py), with the reference captions teacher-forced.

  python bench/shape_attention.py --run_dir runs/shapes [--split test] [--checkpoint best]

Soft attention and hard attention (whose alpha at inference is the same distribution the
samples are drawn from) are measured alike.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=wrong-import-position
import numpy as np
import tensorflow as tf

from nmt_tf.data import captions
from nmt_tf.evaluation import shape_attention
from nmt_tf.experiment import RunDir


def measure(run_dir, split="test", checkpoint="best", batch_size=100):
  """{"first": share, "second": share, "both": share, "captions": n} over the split's captions."""
  model, config, _, tgt_tok = RunDir(run_dir).load_model(checkpoint)
  data_dir = config.data.data_dir or os.path.join(run_dir, "shapes")
  pairs = captions.read_captions(os.path.join(data_dir, f"{split}.tsv"), data_dir)
  grid = int(round(np.sqrt(model.encoder.num_annotations)))
  counts = np.zeros([2, 2])  # [object, (hits, words)]
  index = 0
  for batch in captions.caption_batches(pairs, tgt_tok, config.model.image_size, batch_size):
    attention = model({"source": batch["source"], "target_in": batch["target_in"]},
                      training=False)["attention"].numpy()  # [b, T, L]
    for alpha in attention:
      image = tf.io.decode_png(tf.io.read_file(pairs.images[index]), channels=3).numpy()
      for k, (hit, words) in enumerate(shape_attention.hits(alpha, image, pairs.captions[index],
                                                            grid)):
        counts[k] += (hit, words)
      index += 1
  share = counts[:, 0] / np.maximum(counts[:, 1], 1)
  return {"first": share[0], "second": share[1],
          "both": counts[:, 0].sum() / max(counts[:, 1].sum(), 1), "captions": index}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--run_dir", required=True, nargs="+")
  parser.add_argument("--split", default="test")
  parser.add_argument("--checkpoint", default="best")
  args = parser.parse_args()
  print(f"{'run':40s} {'first':>7s} {'second':>7s} {'both':>7s} captions")
  for run_dir in args.run_dir:
    result = measure(run_dir, args.split, args.checkpoint)
    print(f"{run_dir:40s} {result['first']:7.3f} {result['second']:7.3f} {result['both']:7.3f} "
          f"{result['captions']}")


if __name__ == "__main__":
  main()
