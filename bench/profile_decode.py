"""Where decoding's time goes: op time by op type (and the largest single ops) of greedy or beam
search over the Multi30k validation sentences, under tf.profiler.

Usage: .venv/bin/python bench/profile_decode.py [--beam 1] [--batch_size 64] [--limit 256]
           [--matmul_dtype float32] [--top 25] [--detail MatMul,Tanh]
The model and search are bench/bench_decode.py's (the reference cgru, untrained, output capped
at the source length by default, as `--length_a 1 --length_b 0` there). Warms up on the
profiled sentences (tracing), then records one pass with tf.profiler. Prints one JSON object:
op time per sentence summed over every thread of the host (ops that wrap others, such as While
and the function calls, are left out), each op type's share and count per decoding step, and for
the `--detail` types the op names that take the most time. Shares are meaningful on a busy
machine too; absolute times are not.
"""

import os
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import tensorflow as tf

import common
from nmt_tf.experiment import DecodeConfig
from nmt_tf.inference import CompiledTranslator, translate_lines, Translator
from nmt_tf.models import build_model, ModelConfig

flags.DEFINE_string("pair", "de-en", "Multi30k language pair.")
flags.DEFINE_integer("beam", 1, "Beam size (1 = greedy).")
flags.DEFINE_integer("batch_size", 64, "Sentences per search call.")
flags.DEFINE_integer("limit", 256, "The first N validation sentences (0 = all).")
flags.DEFINE_float("length_a", 1.0, "Output cap a * source length + b (decode.max_length_a).")
flags.DEFINE_float("length_b", 0.0, "Output cap a * source length + b (decode.max_length_b).")
flags.DEFINE_string("matmul_dtype", "float32", "Matrix-product dtype: float32 or bfloat16.")
flags.DEFINE_integer("top", 25, "Op types listed.")
flags.DEFINE_list("detail", ["MatMul", "BatchMatMulV2", "Tanh", "ConcatV2"],
                  "Op types whose largest ops (by name) are listed too.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  corpus, src_tok, tgt_tok = common.load_multi30k(FLAGS.pair)
  sources = list(corpus["valid"].sources[:FLAGS.limit or None])
  keras.utils.set_random_seed(0)
  config = common.reference_model_config(src_tok.vocab_size, tgt_tok.vocab_size)
  model = build_model(ModelConfig(**config))
  model.matmul_dtype = None if FLAGS.matmul_dtype == "float32" else FLAGS.matmul_dtype
  decode = DecodeConfig(beam_size=FLAGS.beam, nbest=1,
                        length_penalty=0.6 if FLAGS.beam > 1 else 0.0, max_length=128,
                        max_length_a=FLAGS.length_a, max_length_b=FLAGS.length_b,
                        batch_size=FLAGS.batch_size)
  compiled = CompiledTranslator(Translator(model, src_tok, tgt_tok, decode))
  translate_lines(compiled, sources, FLAGS.batch_size)  # warm-up: tracing
  logdir = tempfile.mkdtemp(prefix="nmt_tf_profile_decode_")
  tf.profiler.experimental.start(logdir)
  start = time.perf_counter()
  results = translate_lines(compiled, sources, FLAGS.batch_size)
  seconds = time.perf_counter() - start
  tf.profiler.experimental.stop()
  steps = sum(max(len(r.hypotheses[0].ids), 1) for r in results if r.hypotheses)
  n = len(sources)
  # One search step runs once per batch, so ops per step = op count / (batches * mean steps).
  search_steps = steps / n * -(-n // FLAGS.batch_size)
  report = {"beam": FLAGS.beam, "batch_size": FLAGS.batch_size, "sentences": n,
            "matmul_dtype": FLAGS.matmul_dtype, "profile_dir": logdir,
            "wall_ms_per_sentence_profiled": round(seconds * 1e3 / n, 3)}
  report.update(common.profile_summary(logdir, "sentence", n, search_steps, FLAGS.top,
                                       FLAGS.detail, 3))
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
