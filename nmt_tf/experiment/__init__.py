"""Experiment configuration and the run directory shared by every command. The names below
are imported on first use (nmt_tf/lazy.py), so that the model presets (presets.py) load
without TensorFlow; the config (through nmt_tf.data) and the run directory import it."""

from nmt_tf import lazy

_MODULES = {
    "base_config": "nmt_tf.experiment.config",
    "DecodeConfig": "nmt_tf.experiment.config",
    "ExperimentConfig": "nmt_tf.experiment.config",
    "TrainConfig": "nmt_tf.experiment.config",
    "RunDir": "nmt_tf.experiment.run_dir",
    "RunDirError": "nmt_tf.experiment.run_dir",
    "output_input_size": "nmt_tf.models.config",
}

__all__ = list(_MODULES)
__getattr__ = lazy.attributes(__name__, _MODULES)
