"""How close one model's alignments are to another's: for the sentence pairs of a split, each
reference translation teacher-forced through both models, the share of target pieces whose
attention argmax lies within `--window` source pieces of the reference model's
(`inference.alignments.argmax_agreement`). Hard attention against the same soft model says
whether its alignments are as diagonal.

  python bench/alignment_agreement.py --run_dir HARD_RUN --reference_run SOFT_RUN \\
      [--split test] [--window 1] [--sentences 0] [--checkpoint best] [--reference_checkpoint best]

Both runs must share their tokenizers (the same recipe and data).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=wrong-import-position
import numpy as np
import tensorflow as tf

from nmt_tf import data, special_tokens
from nmt_tf.experiment import RunDir
from nmt_tf.inference.alignments import argmax_agreement
from nmt_tf.inference.translator import Translator


def _attention(run_dir, sources, targets, batch_size, checkpoint="best"):
  """[(target ids, attention [tgt_len, src_len])] of each pair, teacher-forced."""
  model, config, src_tok, tgt_tok = RunDir(run_dir).load_model(checkpoint)
  translator = Translator(model, src_tok, tgt_tok, config.decode, config.data.max_length)
  result = []
  for start in range(0, len(sources), batch_size):
    source, _ = translator.source_ids(tf.constant(sources[start:start + batch_size]))
    target_in, target_out, _ = translator.target_ids(tf.constant(targets[start:start + batch_size]))
    attention = model({"source": source, "target_in": target_in})["attention"].numpy()
    for row, ids in enumerate(target_out.numpy()):
      steps = int(np.sum(ids != special_tokens.PAD_ID))
      length = int(np.sum(source[row].numpy() != special_tokens.PAD_ID))
      result.append((ids[:steps].tolist(), attention[row, :steps, :length]))
  return result


def measure(run_dir, reference_run, split="test", window=1, sentences=0, batch_size=64,
            checkpoint="best", reference_checkpoint="best"):
  """(share, steps) over the split's pairs; each run's model from its `checkpoint` (best, last
  or a checkpoint prefix)."""
  config = RunDir(reference_run).load_config()
  pairs = data.load_corpus(config.data)[split]
  sources, targets = list(pairs.sources), list(pairs.targets)
  if sentences:
    sources, targets = sources[:sentences], targets[:sentences]
  hits = steps = 0
  for (ids, attention), (ref_ids, reference) in zip(
      _attention(run_dir, sources, targets, batch_size, checkpoint),
      _attention(reference_run, sources, targets, batch_size, reference_checkpoint)):
    if ids != ref_ids:
      raise ValueError(f"{run_dir} and {reference_run} tokenize the targets differently; "
                       "compare runs that share their tokenizers.")
    h, n = argmax_agreement(attention, reference, window)
    hits, steps = hits + h, steps + n
  return hits / max(steps, 1), steps


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--run_dir", required=True)
  parser.add_argument("--reference_run", required=True)
  parser.add_argument("--split", default="test")
  parser.add_argument("--window", type=int, default=1)
  parser.add_argument("--sentences", type=int, default=0, help="the first N pairs (0 = all)")
  parser.add_argument("--checkpoint", default="best", help="best, last or a checkpoint prefix")
  parser.add_argument("--reference_checkpoint", default="best")
  args = parser.parse_args()
  share, steps = measure(args.run_dir, args.reference_run, args.split, args.window,
                         args.sentences, checkpoint=args.checkpoint,
                         reference_checkpoint=args.reference_checkpoint)
  print(f"argmax within {args.window} of the reference's: {share:.3f} of {steps} target pieces")


if __name__ == "__main__":
  main()
