"""What the recurrence costs: the GRU's state product alone, chained, and inside the GRU loop.

Usage: .venv/bin/python bench/bench_recurrence.py [--batch 128] [--time 20] [--units 512]
    [--precisions float32,float32_bf16_matmul] [--compiled_cell auto,off] [--seconds 3]

Each setting times `--time` steps of a tf.while_loop in a tf.function over a batch of
`--batch` sentences, with the reference model's state product [batch, units] x [units,
3 units] (the encoder's and the cGRU's U h), and reports the products' GFLOP/s (2 batch
units 3 units per product, the best of rounds over `--seconds`):
  independent   the products of every step read that step's own input, not the previous
                result: what the small product runs at when nothing waits for it;
  chained       each product reads the previous one's first `units` columns: the same
                products one after another, with nothing else in the step;
  gru_forward   a reset-after GRUCell's `step` in scan_time, as training runs it: the
                product, then the gates' elementwise ops, which the next product waits for;
                with --compiled_cell auto the gates are the compiled cell
                (layers/kernels/gru_cell.cc), with off TensorFlow's plain ops;
  gru_train     forward and TensorFlow's gradient of the loop (one more product per step,
                da U^T, and dU): 3 products per step counted.
The gaps say where a training step's time goes beyond its FLOPs: chained against independent
is the cost of the dependency (one product at a time, each too small to fill the cores);
gru_forward against chained is the cost of the elementwise ops between the products.
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

import common
from nmt_tf.layers import GRUCell
from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels import scan_time

flags.DEFINE_integer("batch", 128, "Sentences per batch (rows of each product).")
flags.DEFINE_integer("time", 20, "Steps of the time loop.")
flags.DEFINE_integer("units", 512, "GRU units.")
flags.DEFINE_list("precisions", ["float32", "float32_bf16_matmul"], "Training precisions.")
flags.DEFINE_list("modes", ["independent", "chained", "gru_forward", "gru_train"],
                  "Settings to time.")
flags.DEFINE_list("compiled_cell", ["auto", "off"], "The gates of the gru modes: the compiled "
                  "cell (auto) or plain ops (off).")
flags.DEFINE_float("seconds", 3.0, "Timed seconds per setting.")
FLAGS = flags.FLAGS


def loop_function(mode, batch, time, units, matmul_dtype, compiled_cell=True):
  """A tf.function of no arguments running `time` steps of `mode`; returns a scalar."""
  x = tf.random.normal([batch, time, 3 * units]) * 0.5  # W x + b of every step
  h0 = tf.random.normal([batch, units]) * 0.5
  kernel = tf.Variable(tf.random.normal([units, 3 * units]) / units ** 0.5)

  def products(step_input):
    with precision.scope(matmul_dtype):
      u = precision.weight(kernel, tf.float32)

      def body(t, h, out):
        y = precision.matmul(step_input(t, h), u)  # [batch, 3*units]
        return t + 1, y[:, :units], out.write(t, y)

      _, _, out = tf.while_loop(lambda t, *_: t < time, body,
                                (0, h0, tf.TensorArray(tf.float32, size=time)))
      return tf.reduce_sum(out.stack()[:, :1, :1])

  if mode == "independent":
    inputs = tf.random.normal([time, batch, units])
    return tf.function(lambda: products(lambda t, h: inputs[t]))
  if mode == "chained":
    return tf.function(lambda: products(lambda t, h: h))

  cell = GRUCell(units, reset_after=True)
  cell.build((None, 0))  # U, b and b_U only: the loop reads W x + b from x

  def gru(training):
    with precision.scope(matmul_dtype, compiled_cell=compiled_cell), \
        tf.GradientTape() as tape:
      tape.watch(x)
      step = lambda x_t, h, t: (cell.step(x_t, h),) * 2
      states, _ = scan_time(step, x, h0)  # [batch, time, units]
      if not training:
        return tf.reduce_sum(states[:, :1, :1])
      loss = tf.reduce_sum(states * 0.01)
      dx, dkernel = tape.gradient(loss, [x, cell.recurrent_kernel])
      return tf.reduce_sum(dx[:1, :1, :1]) + tf.reduce_sum(dkernel[:1, :1])

  return tf.function(lambda: gru(mode == "gru_train"))


def measure(mode, precision_name, batch, time, units, seconds, cell="auto"):
  """{ms per time step, GFLOP/s of the state products} of one setting."""
  run = loop_function(mode, batch, time, units, precision.matmul_dtype_for(precision_name),
                      cell == "auto")
  run().numpy()  # trace and warm up
  run().numpy()
  best, spent = float("inf"), 0.0
  while spent < seconds:
    with common.Timer() as t:
      run().numpy()
    spent += t.seconds
    best = min(best, t.seconds)
  products = 3 if mode == "gru_train" else 1
  flops = 2.0 * batch * units * 3 * units * time * products
  return {"mode": mode, "precision": precision_name,
          **({"compiled_cell": cell} if mode.startswith("gru") else {}),
          "ms_per_step": round(best / time * 1e3, 3),
          "products_gflops": round(flops / best / 1e9, 1)}


def main(argv):
  del argv
  rows = [measure(mode, name, FLAGS.batch, FLAGS.time, FLAGS.units, FLAGS.seconds, cell)
          for name in FLAGS.precisions for mode in FLAGS.modes
          for cell in (FLAGS.compiled_cell if mode.startswith("gru") else ["auto"])]
  common.print_json({"batch": FLAGS.batch, "time": FLAGS.time, "units": FLAGS.units,
                     "rows": rows, **common.device_info()})


if __name__ == "__main__":
  app.run(main)
