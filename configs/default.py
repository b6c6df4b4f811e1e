"""Default experiment: the cgru (dl4mt) model on the built-in generated language pair.

Small enough to train in minutes on 2 CPU cores; `python run.py train` and `run.py main` use it
when no --config is given. Same as configs/cgru_generated.py (nmt_tf/training/presets.py).
"""

from nmt_tf.training.presets import preset


def get_config():
  return preset("cgru", "generated")
