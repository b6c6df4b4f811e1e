"""Experiment configuration and the run directory shared by every command."""

from nmt_tf.experiment.config import (base_config, DecodeConfig, ExperimentConfig, TrainConfig)
from nmt_tf.experiment.run_dir import RunDir, RunDirError

__all__ = ["base_config", "DecodeConfig", "ExperimentConfig", "TrainConfig", "RunDir",
           "RunDirError"]
