"""sar_cavg on Multi30k de->en (10k-word vocabularies, at most 50 words, emb 256,
BiGRU 2x512, decoder 512); the -30 variant: --config.pipeline.max_source_len=30
--config.pipeline.max_target_len=30.

Usage: python run.py train --config=configs/sar_cavg_multi30k_word.py --run_dir=runs/sar_cavg_multi30k_word
(override any field: --config.train.steps=100). See nmt_tf/training/presets.py.
"""

from nmt_tf.training.presets import preset


def get_config():
  return preset("sar_cavg", "multi30k_word")
