"""luong on the built-in generated language pair (word vocabularies, small model).

Usage: python run.py train --config=configs/luong_generated.py --run_dir=runs/luong_generated
(override any field: --config.train.steps=100). See nmt_tf/training/presets.py.
"""

from nmt_tf.training.presets import preset


def get_config():
  return preset("luong", "generated")
