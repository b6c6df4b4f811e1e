"""Measured matmul peak of this machine in TensorFlow, float32 and bfloat16.

Usage: .venv/bin/python bench/bench_peak.py [--size 2048] [--seconds 3]
Times tf.matmul of two [size, size] matrices in a tf.function (so the figure is the kernel's,
not Python's) for each dtype and prints one JSON object with GFLOP/s (2 n^3 per product). The
bfloat16 figure uses the AMX tiles through oneDNN on CPUs that have them.
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

import common

flags.DEFINE_integer("size", 2048, "Matrix size n of the n x n products.")
flags.DEFINE_float("seconds", 3.0, "Timed seconds per dtype.")
FLAGS = flags.FLAGS


def matmul_peak(dtype, size=2048, seconds=3.0, repeats=8):
  """Best GFLOP/s over timed rounds of `repeats` chained [size, size] matmuls."""
  a = tf.random.normal([size, size], dtype=tf.float32)
  a = tf.cast(a / size ** 0.5, dtype)
  b = tf.cast(tf.random.normal([size, size]) / size ** 0.5, dtype)

  @tf.function
  def chain(x):
    for _ in range(repeats):
      x = tf.matmul(x, b)
    return tf.reduce_sum(tf.cast(x[:1, :1], tf.float32))

  chain(a).numpy()  # warm-up
  best, spent = 0.0, 0.0
  while spent < seconds:
    with common.Timer() as t:
      chain(a).numpy()
    spent += t.seconds
    best = max(best, 2.0 * size ** 3 * repeats / t.seconds / 1e9)
  return best


def measure(size=2048, seconds=3.0):
  """{"float32": GFLOP/s, "bfloat16": GFLOP/s}."""
  return {"float32": round(matmul_peak(tf.float32, size, seconds), 1),
          "bfloat16": round(matmul_peak(tf.bfloat16, size, seconds), 1)}


def main(argv):
  del argv
  common.print_json({"matmul_gflops": measure(FLAGS.size, FLAGS.seconds), "size": FLAGS.size,
                     **common.device_info()})


if __name__ == "__main__":
  app.run(main)
