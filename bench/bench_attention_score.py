"""Micro-benchmark of the additive attention score's training cost inside a time loop.

Usage: .venv/bin/python bench/bench_attention_score.py [--passes 8]
A tf.while_loop of 22 steps (batch 100, 22 source positions, 512 units: the reference
model's ~2,000-token batches) computes e_t = v^T tanh(K + q_t), q_t = W x_t, and a softmax
loss; forward and backward are timed, interleaved over the variants, median per variant (ms):
  cheap       the loop without the tanh score (its floor)
  plain       TensorFlow ops (`additive_score(..., fused=False)`, decoding and float32)
  xla         the score function jit-compiled, TensorFlow's own gradient
  custom      custom gradient recomputing tanh, plain ops
  custom_xla  custom gradient, XLA forward and backward kernels (`additive_score(...,
              fused=True)`, training with bfloat16 products)
  nodk        custom_xla without the keys' gradient (a lower bound for deferring it)
The variants reuse the functions of nmt_tf/layers/kernels/fused.py. Prints one JSON object.
"""
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position,protected-access
from nmt_tf.layers.kernels import fused

B, S, A, T, Q = 100, 22, 512, 22, 512
_bwd = fused._score_grad.python_function  # (keys, q, v, de) -> dk, dq, dv, plain ops


def score_plain(keys, q, v):
  return fused.additive_score(keys, q, v, fused=False)


def cheap(keys, q, v):
  del keys
  return tf.zeros([B, S]) + tf.reduce_sum(q * v, -1)[:, None]


def custom(jit, keys_grad=True):
  fwd = fused._score if jit else score_plain
  bwd = fused._score_grad if jit else _bwd

  @tf.custom_gradient
  def score(keys, q, v):
    def grad(de):
      dk, dq, dv = bwd(keys, q, v, de)
      return (dk if keys_grad else None), dq, dv
    return fwd(keys, q, v), grad
  return score


def main():
  passes = int(sys.argv[sys.argv.index("--passes") + 1]) if "--passes" in sys.argv else 8
  keys0 = tf.Variable(tf.random.normal([B, S, A]))
  v = tf.Variable(tf.random.normal([A]))
  w = tf.Variable(tf.random.normal([Q, A]) * 0.05)
  qs = tf.random.normal([T, B, Q])

  def make(score):
    @tf.function
    def run():
      with tf.GradientTape() as tape:
        keys = keys0 * 1.0
        vv = tf.convert_to_tensor(v)
        def body(t, acc):
          e = score(keys, tf.matmul(qs[t], w), vv)
          return t + 1, acc + tf.reduce_sum(tf.nn.softmax(e) * tf.range(S, dtype=tf.float32))
        _, acc = tf.while_loop(lambda t, a: t < T, body, (0, 0.0))
      return acc, tape.gradient(acc, [keys0, v, w])
    return run

  fns = {"cheap": make(cheap), "plain": make(score_plain),
         "xla": make(tf.function(score_plain, jit_compile=True)), "custom": make(custom(False)),
         "custom_xla": make(lambda k, q, vv: fused.additive_score(k, q, vv, fused=True)),
         "nodk": make(custom(True, keys_grad=False))}
  for f in fns.values():
    f()
  times = {k: [] for k in fns}
  for _ in range(passes):
    for k, f in fns.items():
      start = time.perf_counter()
      float(f()[0])
      times[k].append(time.perf_counter() - start)
  print(json.dumps({"batch": B, "src_len": S, "units": A, "steps": T, "passes": passes,
                    "median_ms": {k: round(1000 * float(np.median(t)), 1)
                                  for k, t in times.items()}}, indent=2))


if __name__ == "__main__":
  main()
