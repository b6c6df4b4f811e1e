"""nmt_tf.training: the training loop, its steps, checkpoints and summaries (docs/TRAINING.md).

  summary = training.train(config, "runs/demo")   # or Trainer(config, run_dir).train()
"""

from nmt_tf.experiment.config import ExperimentConfig
from nmt_tf.training.captioning import CaptionTrainer
from nmt_tf.training.errors import TrainingError
from nmt_tf.training.keras_callbacks import BleuValidation
from nmt_tf.training.trainer import Trainer


def train(config, run_dir, **kwargs):
  """Trains `config` in `run_dir`; returns the summary dict (steps, best_bleu, wall_time,
  checkpoint, best_checkpoint, stopped, last_validation). kwargs go to the trainer: a
  config with model.encoder="image" trains a captioner (CaptionTrainer), any other a
  translation model (Trainer)."""
  if not isinstance(config, ExperimentConfig):
    config = ExperimentConfig.from_dict(config)
  trainer = CaptionTrainer if config.model.encoder == "image" else Trainer
  return trainer(config, run_dir, **kwargs).train()


__all__ = ["BleuValidation", "CaptionTrainer", "TrainingError", "Trainer", "train"]
