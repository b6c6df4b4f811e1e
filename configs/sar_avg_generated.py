"""sar_avg on the built-in generated language pair (word vocabularies, small model).

Usage: python run.py train --config=configs/sar_avg_generated.py --run_dir=runs/sar_avg_generated
(override any field: --config.train.steps=100). See nmt_tf/training/presets.py.
"""

from nmt_tf.training.presets import preset


def get_config():
  return preset("sar_avg", "generated")
