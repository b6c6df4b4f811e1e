"""OpenNMT-tf 2.32 anchor: training target tokens/s and decoding sentences/s on Multi30k de-en.

Usage (with the OpenNMT-tf anchor venv's python, after setup.sh and prepare.py):
  python bench/anchor/opennmt_tf/run.py [--anchor_dir DIR] [--steps 150] [--threads 2]
      [--beams 1,5] [--sets test_2016,val] [--max_length 128] [--forced_lengths 0,41]
      [--skip_train]
Training: `onmt-main train` (OpenNMT-tf's own loop) of model.py on config.yml.in for --steps
steps; the figures are its logged target tokens/s ("tokens/s = N (S source, T target)", each
over --save_summary_steps 10 steps of wall time, target tokens incl. </s>), with the first
--warmup share of the steps dropped. Decoding: `onmt-main infer --log_prediction_time` on the
checkpoint just trained, batches of 64 sentences in file order; the figure is the number of
sentences over its "Total prediction time", which starts after the graph is traced and
includes the first batch's run. The output length is the model's (EOS, or --max_length), and
with --forced_lengths N every output is N pieces (41: the mean cap of bench_decode.py's
untrained model on val, min(128, 2 * source + 10)), so that both toolkits do the same work.
Prints one JSON object on stdout; logs go to DIR/opennmt_tf/run.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import string
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # pylint: disable=wrong-import-position
SETS = {"test_2016": "test_2016_flickr", "val": "val"}  # name -> file prefix
STEP_LINE = re.compile(r"Step = (\d+) ; steps/s = [\d.]+, tokens/s = \d+ \((\d+) source, "
                       r"(\d+) target\)")
TIME_LINE = re.compile(r"Total prediction time \(s\): ([\d.]+)")


def write_config(args, run_dir, beam, forced=0):
  with open(os.path.join(HERE, "config.yml.in"), encoding="utf-8") as f:
    text = string.Template(f.read()).substitute(
        data=os.path.join(args.anchor_dir, "opennmt_tf", "data"),
        model_dir=os.path.join(run_dir, "model"), steps=args.steps,
        batch_tokens=args.batch_tokens, beam=beam, min_length=forced,
        max_length=forced or args.max_length)
  path = os.path.join(run_dir, f"config_beam{beam}_forced{forced}.yml")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def onmt(args, config, *command, log):
  """Runs onmt-main with the anchor's model, threads and config; its log into `log`."""
  main = os.path.join(os.path.dirname(sys.executable), "onmt-main")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", OMP_NUM_THREADS=str(args.threads))
  with open(log, "w", encoding="utf-8") as out:
    subprocess.run([main, "--model", os.path.join(HERE, "model.py"), "--config", config,
                    "--intra_op_parallelism_threads", str(args.threads),
                    "--inter_op_parallelism_threads", str(args.threads), *command],
                   stdout=out, stderr=subprocess.STDOUT, env=env, check=True)
  with open(log, encoding="utf-8") as f:
    return f.read()


def train(args, run_dir):
  shutil.rmtree(os.path.join(run_dir, "model"), ignore_errors=True)  # a fresh run each time
  log = onmt(args, write_config(args, run_dir, 1), "train", log=os.path.join(run_dir,
                                                                              "train.log"))
  rows = [(int(step), int(target)) for step, _, target in STEP_LINE.findall(log)]
  kept = [target for step, target in rows if step > args.warmup * args.steps]
  if not kept:
    raise SystemExit(f"no training speed lines in {run_dir}/train.log")
  return {"steps": args.steps, "batch_tokens": args.batch_tokens,
          "target_tokens_per_s_median": statistics.median(kept),
          "target_tokens_per_s_mean": round(statistics.mean(kept), 1),
          "lines_kept": len(kept)}


def decode(args, run_dir, beam, name, forced=0):
  """Sentences/s of one decoding pass; with `forced`, every output is that many pieces
  (OpenNMT-tf's minimum and maximum decoding length)."""
  prefix = SETS[name]
  data = os.path.join(args.anchor_dir, "opennmt_tf", "data")
  tag = f"beam{beam}" + (f"_forced{forced}" if forced else "")
  out = os.path.join(run_dir, f"{prefix}.{tag}.en.sp")
  log = onmt(args, write_config(args, run_dir, beam, forced), "infer", "--features_file",
             os.path.join(data, f"{prefix}.de.sp"), "--predictions_file", out,
             "--log_prediction_time", log=os.path.join(run_dir, f"infer_{name}_{tag}.log"))
  seconds = float(TIME_LINE.findall(log)[-1])
  with open(out, encoding="utf-8") as f:
    lengths = [len(line.split()) + 1 for line in f]  # pieces and </s>
  return {"sentences": len(lengths), "seconds": seconds,
          "sentences_per_s": round(len(lengths) / seconds, 2),
          "output_pieces_per_sentence": round(sum(lengths) / len(lengths), 2)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  common.add_dir_arguments(parser)
  parser.add_argument("--steps", type=int, default=150)
  parser.add_argument("--warmup", type=float, default=0.2,
                      help="Share of the steps whose speed lines are dropped.")
  parser.add_argument("--batch_tokens", type=int, default=2000)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--beams", default="1,5")
  parser.add_argument("--sets", default="test_2016")
  parser.add_argument("--max_length", type=int, default=128)
  parser.add_argument("--forced_lengths", default="0,41",
                      help="Output lengths to decode at (0: the model's own </s>; N: every "
                           "output N pieces, the work of a search capped there).")
  parser.add_argument("--skip_train", action="store_true",
                      help="Decode the previous run's checkpoint again.")
  args = parser.parse_args()
  run_dir = os.path.join(args.anchor_dir, "opennmt_tf", "run")
  os.makedirs(run_dir, exist_ok=True)
  import opennmt  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  result = {"toolkit": f"OpenNMT-tf {opennmt.__version__}, TensorFlow {tf.__version__}",
            "machine": common.machine(), "threads": args.threads}
  if not args.skip_train:
    result["train"] = train(args, run_dir)
  result["decode"] = {
      f"{name}_beam{beam}" + (f"_forced{forced}" if int(forced) else ""):
          decode(args, run_dir, int(beam), name, int(forced))
      for name in args.sets.split(",") for beam in args.beams.split(",")
      for forced in args.forced_lengths.split(",")}
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
