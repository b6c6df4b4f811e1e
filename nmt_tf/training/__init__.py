"""nmt_tf.training: the training loop, its steps, checkpoints and summaries (docs/TRAINING.md).

  summary = training.train(config, "runs/demo")   # or Trainer(config, run_dir).train()
"""

from nmt_tf.training.errors import TrainingError
from nmt_tf.training.trainer import train, Trainer
