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


@contextlib.contextmanager
def zero_initialized_weights():
  """Every Keras weight created inside starts as zeros instead of its initializer's draw.

  For a model whose checkpoint is restored next (`RunDir.load_model`, whose restore fails
  for any weight the checkpoint lacks): the reference model's orthogonal (QR) and random
  draws take about 0.5 s of a 2-core CPU, a third of `nmt-tf translate`'s start-up after
  `import tensorflow`, and would be overwritten. Replaces `keras.layers.Layer.add_weight`
  while inside, for every thread: build nothing to train meanwhile."""
  original = keras.layers.Layer.add_weight

  def add_weight(self, *args, **kwargs):
    if len(args) >= 2:  # Keras 2's positional (shape, initializer, dtype)
      args = (args[0], "zeros") + args[2:]
    else:
      kwargs["initializer"] = "zeros"
    return original(self, *args, **kwargs)

  keras.layers.Layer.add_weight = add_weight
  try:
    yield
  finally:
    keras.layers.Layer.add_weight = original


def build_model(model_config, precision="float32", kernel_options=None, initialize=True,
                checkpoint=None):
  """A Seq2Seq for `model_config` (a ModelConfig; an ImageCaptioner for encoder="image") with
  every weight created; kernel_options: its kernels.KernelOptions (None: the defaults);
  initialize=False: every weight zeros, for a checkpoint to be restored into
  (`zero_initialized_weights`); checkpoint: the path of that checkpoint, for a model that
  decodes: a Seq2Seq is built by one decoding step (`Seq2Seq.build_for_decoding`), and by the
  teacher-forced batch as well if the checkpoint holds model values it made no weight for."""
  precision, _ = cpu.resolve_precision(precision, gpus=tf.config.list_physical_devices("GPU"))
  matmul_dtype = kernels.matmul_dtype_for(precision)
  weights = contextlib.nullcontext() if initialize else zero_initialized_weights()
  with dtype_policy("float32" if matmul_dtype else precision), weights:
    cls = ImageCaptioner if model_config.encoder == "image" else Seq2Seq
    model = cls(model_config, kernel_options=kernel_options,
                    matmul_dtype=matmul_dtype)
    if checkpoint is not None and cls is Seq2Seq:
      model.build_for_decoding()
      if values_without_weights(checkpoint, model):
        model.build_with_dummy_batch()
    else:
      model.build_with_dummy_batch()
  return model


def values_without_weights(path, model):
  """The names of the model values in checkpoint `path` (saved as `tf.train.Checkpoint(
  model=...)`, as every run's checkpoint is) that no weight of `model` would restore; a
  checkpoint that cannot be read gives ["?"] (the restore that follows names the damage)."""
  try:
    view = tf.train.CheckpointView(path)
    matched = view.match(tf.train.Checkpoint(model=model))
    names = [name for name, _ in tf.train.list_variables(path)]
  except (tf.errors.OpError, IndexError, ValueError, KeyError):
    return ["?"]
  missing = []
  for name in names:
    parts = name.split("/")
    if parts[0] != "model" or ".ATTRIBUTES" not in parts or ".OPTIMIZER_SLOT" in parts:
      continue
    node = 0  # the checkpoint's root
    for part in parts[:parts.index(".ATTRIBUTES")]:
      node = view.children(node).get(part)
      if node is None:
        break
    if node is None or node not in matched:
      missing.append(name)
  return missing
