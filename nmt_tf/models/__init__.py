"""Encoders, decoders, the Seq2Seq model and its validated config."""

from nmt_tf.models.config import ConfigError, ModelConfig, DECODERS, ENCODERS
from nmt_tf.models.captioner import ImageCaptioner
from nmt_tf.models.factory import build_model
from nmt_tf.models.seq2seq import Seq2Seq, build_decoder, build_encoder

__all__ = ["ConfigError", "ModelConfig", "DECODERS", "ENCODERS", "ImageCaptioner", "Seq2Seq", "build_decoder",
           "build_encoder", "build_model"]
