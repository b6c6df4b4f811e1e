"""The one place a Seq2Seq is made: training, loading a run, averaging and the benchmarks all
call `build_model`.

precision (train.precision): float32; float32_bf16_matmul, a float32 model whose matrix
products take bfloat16 operands (`ops.forward_pass`); mixed_bfloat16 and mixed_float16,
Keras dtype policies, set while the layers are created; auto, one of the first two for this
machine (`nmt_tf.cpu.resolve_precision`).
"""

import contextlib

import keras
import tensorflow as tf

from nmt_tf import cpu
from nmt_tf.layers import kernels
from nmt_tf.models.captioner import ImageCaptioner
from nmt_tf.models.seq2seq import Seq2Seq


@contextlib.contextmanager
def dtype_policy(name):
  """Sets the Keras global dtype policy while the model is built, then restores it."""
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(name)
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)


def build_model(model_config, precision="float32", kernel_options=None):
  """A Seq2Seq for `model_config` (a ModelConfig; an ImageCaptioner for encoder="image") with
  every weight created; kernel_options: its kernels.KernelOptions (None: the defaults)."""
  precision, _ = cpu.resolve_precision(precision, gpus=tf.config.list_physical_devices("GPU"))
  matmul_dtype = kernels.matmul_dtype_for(precision)
  with dtype_policy("float32" if matmul_dtype else precision):
    cls = ImageCaptioner if model_config.encoder == "image" else Seq2Seq
    model = cls(model_config, kernel_options=kernel_options,
                    matmul_dtype=matmul_dtype)
    model.build_with_dummy_batch()
  return model
