"""nmt_tf: attention-based neural machine translation in TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
