"""Experiment configuration and the run directory shared by every command."""

from nmt_tf.experiment.config import (base_config, DecodeConfig, ExperimentConfig, TrainConfig)
from nmt_tf.experiment.run_dir import RunDir, RunDirError
from nmt_tf.models.config import output_input_size

__all__ = ["base_config", "DecodeConfig", "ExperimentConfig", "TrainConfig", "RunDir",
           "RunDirError", "output_input_size"]
