"""nmt_tf: attention-based neural machine translation in TensorFlow 2 / Keras 3.

The Python API (TensorFlow is imported on first use, not by `import nmt_tf`):

  nmt_tf.load(run_dir)            a trained run: .translate(sentences, beam_size, nbest) and
                                  .score(sources, targets) (inference/translation_model.py)
  nmt_tf.load_captioner(run_dir)  a trained captioning run: .caption(images, beam_size)
                                  (inference/caption_model.py)
  nmt_tf.train(config, run_dir)   train or resume a run; config: an ExperimentConfig, or the
                                  ml_collections ConfigDict of a recipe
  nmt_tf.recipe("multi30k:luong") a recipe with a model preset, as a ConfigDict (`nmt-tf
                                  recipes` lists them), or a config file of yours,
                                  "my_config.py[:ARG]": what --config=VALUE gives
  nmt_tf.base_config()            every field with its default, as a ConfigDict
  nmt_tf.ExperimentConfig         the validated configuration

The command line is `nmt-tf` (or `python run.py`); `nmt-tf help` lists its commands.
"""

from nmt_tf import lazy

__version__ = "0.1.0"

_API = {
    "load": "nmt_tf.inference.translation_model",
    "TranslationModel": "nmt_tf.inference.translation_model",
    "Translation": "nmt_tf.inference.translation_model",
    "load_captioner": "nmt_tf.inference.caption_model",
    "Caption": "nmt_tf.inference.caption_model",
    "train": "nmt_tf.training",
    "base_config": "nmt_tf.experiment",
    "recipe": "nmt_tf.configs:load",
    "ExperimentConfig": "nmt_tf.experiment",
}

__all__ = sorted(_API)
__getattr__ = lazy.attributes(__name__, _API)
