"""rnnsearch on Multi30k de->en (SentencePiece 8k, emb 256, BiGRU 2x512, decoder 512).

Usage: python run.py train --config=configs/rnnsearch_multi30k.py --run_dir=runs/rnnsearch_multi30k
(override any field: --config.train.steps=100). See nmt_tf/training/presets.py.
"""

from nmt_tf.training.presets import preset


def get_config():
  return preset("rnnsearch", "multi30k")
