"""Encoders, decoders, the Seq2Seq model and its validated config. The names below are
imported on first use (nmt_tf/lazy.py): `nmt_tf.models.config` imports no TensorFlow, the
models do."""

from nmt_tf import lazy

_MODULES = {
    "ConfigError": "nmt_tf.models.config",
    "ModelConfig": "nmt_tf.models.config",
    "DECODERS": "nmt_tf.models.config",
    "ENCODERS": "nmt_tf.models.config",
    "ImageCaptioner": "nmt_tf.models.captioner",
    "build_model": "nmt_tf.models.factory",
    "Seq2Seq": "nmt_tf.models.seq2seq",
    "build_decoder": "nmt_tf.models.seq2seq",
    "build_encoder": "nmt_tf.models.seq2seq",
}

__all__ = list(_MODULES)
__getattr__ = lazy.attributes(__name__, _MODULES)
