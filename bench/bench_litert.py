"""The LiteRT export against the SavedModel: file size, greedy speed and BLEU.

Usage: .venv/bin/python bench/bench_litert.py --run_dir=RUN [--pair de-en] [--threads 1,2]
           [--repeats 2] [--batch_size 32] [--out_dir DIR]
RUN is a trained Multi30k run. Its best checkpoint is exported once as a SavedModel and as
LiteRT float32, float16 and int8 (into --out_dir, default a temporary directory). Then, each
in a fresh process and the settings alternated --repeats times:
  speed: greedy translation of Multi30k val (1,014 sentences, in file order, --batch_size
    per call) from text to text, tokenization included: the SavedModel's serving_default
    signature (TensorFlow with N intra-op threads), the LiteRT models through their own client
    (nmt_litert.py, N interpreter threads); the first batch is a warm-up and is not timed;
  quality: greedy BLEU (sacrebleu, cased, detokenized) on test_2016_flickr, once per model.
Prints one JSON object: the CPU, then per model its size in bytes, sentences/s per thread
count (every repeat) and BLEU.
"""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

flags.DEFINE_string("run_dir", None, "A trained Multi30k run directory.")
flags.DEFINE_string("pair", "de-en", "Multi30k language pair of the run.")
flags.DEFINE_list("threads", ["1", "2"], "Thread counts to time.")
flags.DEFINE_integer("repeats", 2, "Timed passes per model and thread count, alternated.")
flags.DEFINE_integer("batch_size", 32, "Sentences per call.")
flags.DEFINE_string("out_dir", None, "Where the exports go; default a temporary directory.")
# Internal: one timed or scored pass in a fresh process.
flags.DEFINE_string("worker", None, "savedmodel or litert: run one pass and print JSON.")
flags.DEFINE_string("path", None, "The export of --worker.")
flags.DEFINE_string("input", None, "Sentences of --worker, one per line.")
FLAGS = flags.FLAGS

QUANTIZATIONS = ("float32", "float16", "int8")


def _lines(path):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def _size(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _worker(kind, path, threads, sentences, batch_size):
  """Translates `sentences` greedily; (seconds after the first batch, translations)."""
  batches = [sentences[i:i + batch_size] for i in range(0, len(sentences), batch_size)]
  if kind == "savedmodel":
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # pylint: disable=import-outside-toplevel,unused-import
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    greedy = tf.saved_model.load(path).signatures["serving_default"]

    def translate(batch):
      out = greedy(text=tf.constant(batch))["translation"].numpy()
      return [t.decode("utf-8") for t in out]
  else:
    sys.path.insert(0, path)
    import nmt_litert  # pylint: disable=import-outside-toplevel
    client = nmt_litert.LiteRTTranslator(path, num_threads=threads)

    def translate(batch):
      return [t.text for t in client.translate(batch, batch_size=batch_size)]
  outputs = translate(batches[0])
  start = time.perf_counter()
  for batch in batches[1:]:
    outputs += translate(batch)
  return time.perf_counter() - start, outputs


def _run_worker(kind, path, threads, input_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run(
      [sys.executable, os.path.abspath(__file__), f"--worker={kind}", f"--path={path}",
       f"--threads={threads}", f"--input={input_path}", f"--batch_size={FLAGS.batch_size}"],
      capture_output=True, text=True, env=env, check=False)
  if out.returncode:
    raise RuntimeError(f"{kind} worker failed: {out.stderr[-2000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv):
  del argv
  if FLAGS.worker:
    with open(FLAGS.input, encoding="utf-8") as f:
      sentences = [line.rstrip("\n") for line in f]
    seconds, outputs = _worker(FLAGS.worker, FLAGS.path, int(FLAGS.threads[0]), sentences,
                               FLAGS.batch_size)
    print(json.dumps({"seconds": seconds, "timed": len(sentences) - FLAGS.batch_size,
                      "outputs": outputs}))
    return
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  # pylint: disable=import-outside-toplevel
  import sacrebleu
  import common  # bench/common.py
  from nmt_tf.data import multi30k
  from nmt_tf.export import export_litert, export_run

  source, target = FLAGS.pair.split("-")
  data_dir = multi30k.default_dir()
  out_dir = FLAGS.out_dir or tempfile.mkdtemp(prefix="bench_litert_")
  os.makedirs(out_dir, exist_ok=True)
  inputs = {}
  for split in ("val", "test_2016_flickr"):
    inputs[split] = os.path.join(out_dir, f"{split}.{source}")
    with open(inputs[split], "w", encoding="utf-8") as f:
      f.writelines(line + "\n" for line in _lines(os.path.join(data_dir,
                                                              f"{split}.{source}.gz")))
  references = _lines(os.path.join(data_dir, f"test_2016_flickr.{target}.gz"))
  models = {"savedmodel": ("savedmodel", export_run(FLAGS.run_dir, export_dir=out_dir,
                                                    warmup=False))}
  for q in QUANTIZATIONS:
    models[f"litert_{q}"] = ("litert", export_litert(FLAGS.run_dir, export_dir=out_dir,
                                                     quantization=q))
  report = {"device": common.device_info(), "run_dir": FLAGS.run_dir, "batch_size": FLAGS.batch_size,
            "models": {}}
  for name, (kind, path) in models.items():
    size = _size(os.path.join(path, "model.tflite") if kind == "litert" else path)
    scored = _run_worker(kind, path, 2, inputs["test_2016_flickr"])
    bleu = sacrebleu.corpus_bleu(scored["outputs"], [references]).score
    report["models"][name] = {"bytes": size, "test_bleu": round(bleu, 2),
                              "sentences_per_s": {t: [] for t in FLAGS.threads}}
  for _ in range(FLAGS.repeats):
    for threads in FLAGS.threads:
      for name, (kind, path) in models.items():
        timed = _run_worker(kind, path, int(threads), inputs["val"])
        report["models"][name]["sentences_per_s"][threads].append(
            round(timed["timed"] / timed["seconds"], 1))
  print(json.dumps(report, indent=1))


if __name__ == "__main__":
  app.run(main)
