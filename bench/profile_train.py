"""Where a training step's time goes: op time by op type (and the largest single ops) over a
few steps of the reference model under tf.profiler.

Usage: .venv/bin/python bench/profile_train.py [--precision float32_bf16_matmul] [--steps 3]
           [--top 25] [--detail AddN,ConcatV2] [--decoders cgru]
Builds the model (the first of `--decoders` in the reference model) and `TrainStep` as
bench/bench_train.py does, warms up on the profiled batches
(tracing), then records `--steps` steps with tf.profiler. Prints one JSON object: the op time
per step summed over every thread of the host (so it exceeds the step's wall time, and ops that
wrap others, such as While and the function calls, are left out), each op type's share, and for
the `--detail` types the op names that take the most time (e.g. the gradient sums of a time
loop's backward pass). Shares are meaningful on a busy machine too; absolute times are not.
"""

import os
import sys
import tempfile

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import tensorflow as tf

import common
from bench_train import make_batches  # also defines --pair
from nmt_tf.experiment import TrainConfig
from nmt_tf.models import ModelConfig
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.train_step import TrainStep
from nmt_tf.models import build_model

flags.DEFINE_string("precision", "float32_bf16_matmul", "train.precision of the profiled step.")
flags.DEFINE_integer("steps", 3, "Profiled steps (distinct batches, after a warm-up pass).")
flags.DEFINE_integer("top", 25, "Op types listed.")
flags.DEFINE_list("detail", ["AddN", "ConcatV2", "Sum", "Mul"],
                  "Op types whose largest ops (by name) are listed too.")
FLAGS = flags.FLAGS

def main(argv):
  del argv
  corpus, src_tok, tgt_tok = common.load_multi30k(FLAGS.pair)
  vocab = (src_tok.vocab_size, tgt_tok.vocab_size)
  batches = make_batches(corpus, src_tok, tgt_tok, FLAGS.steps, 2000)
  keras.utils.set_random_seed(0)
  train_cfg = TrainConfig(precision=FLAGS.precision, clip_norm=1.0, label_smoothing=0.1,
                          learning_rate=5e-4)
  model = build_model(ModelConfig(**{**common.reference_model_config(*vocab),
                                     "decoder": FLAGS.decoders[0]}), FLAGS.precision)
  optimizer = FusedAdam(learning_rate=5e-4)  # the Trainer's
  optimizer.build(model.trainable_variables)
  step = TrainStep(model, optimizer, tf.distribute.get_strategy(), train_cfg)
  for batch in batches:  # warm-up: tracing
    float(step(batch)["loss"])
  logdir = tempfile.mkdtemp(prefix="nmt_tf_profile_")
  tf.profiler.experimental.start(logdir)
  for batch in batches:
    float(step(batch)["loss"])
  tf.profiler.experimental.stop()
  n = FLAGS.steps
  report = {"precision": FLAGS.precision, "steps": n, "profile_dir": logdir}
  report.update(common.profile_summary(logdir, "step", n, n, FLAGS.top, FLAGS.detail, 1))
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
