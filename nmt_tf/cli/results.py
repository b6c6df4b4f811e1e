"""`python run.py results`: one row of docs/RESULTS.md. Trains --config in --run_dir (resumable,
within the config's train.max_minutes), then evaluates the best checkpoint on the test split
with greedy search and with beam search, and writes RUN/results.json.

  python run.py results --config=configs/cgru_multi30k.py --run_dir=runs/results/cgru_de-en
  python run.py results --config=configs/cgru_multi30k.py --run_dir=runs/results/cgru_en-de \
      --config.data.source_lang=en --config.data.target_lang=de

The evaluations go to RUN/eval/test_greedy and RUN/eval/test_beam5 (see `run.py evaluate`);
`python run.py report` gathers the rows into docs/RESULTS.md.
"""

import datetime
import json
import os
import sys
import time

from absl import flags

from nmt_tf.cli import evaluate, train

COMMAND = "results"
HELP = "One results row: train (time budget), evaluate greedy and beam 5, write results.json."

flags.DEFINE_list("results_beams", ["1", "5"], "Beam sizes to evaluate (1 = greedy).")

FLAGS = flags.FLAGS


def _machine():
  model = ""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      model = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), "")
  except OSError:
    pass
  return f"{os.cpu_count()} CPUs {model}".strip()


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def run(argv):
  # pylint: disable=g-import-not-at-top
  from nmt_tf.evaluation.results import (model_label, ROW_FILE, scores_entry, validation_points,
                                         validations)
  if argv:
    print(f"results takes no positional arguments; received {argv}.", file=sys.stderr)
    return 2
  try:
    beams = [int(b) for b in FLAGS.results_beams]
  except ValueError:
    beams = [0]
  if not beams or min(beams) < 1:
    print(f"error: Received --results_beams={FLAGS.results_beams}; expected beam sizes >= 1 "
          "such as 1,5.", file=sys.stderr)
    return 2
  command = "python run.py " + " ".join(sys.argv[1:])
  print("\n=== train ===", flush=True)
  code = train.run([])
  if code:
    return code
  scores, start = {}, time.time()
  for beam in beams:
    key = "greedy" if beam == 1 else f"beam{beam}"
    FLAGS.beam_size = beam
    FLAGS.eval_split = "test"
    FLAGS.checkpoint = "best"
    FLAGS.eval_dir = os.path.join(FLAGS.run_dir, "eval", f"test_{key}")
    print(f"\n=== evaluate, beam {beam} ===", flush=True)
    code = evaluate.run([])
    if code:
      return code
    entry = scores_entry(_read(os.path.join(FLAGS.eval_dir, "report.json")))
    entry["attention_images"] = [os.path.relpath(p, FLAGS.run_dir)
                                 for p in entry["attention_images"] or []]
    scores[key] = entry
  config = _read(os.path.join(FLAGS.run_dir, "config.json"))
  summary = _read(os.path.join(FLAGS.run_dir, "train_summary.json"))
  row = {
      "name": os.path.basename(os.path.normpath(FLAGS.run_dir)),
      "command": command,
      "model": model_label(config["model"]),
      "decoder": config["model"]["decoder"],
      "direction": (f"{config['data']['source_lang']}-{config['data']['target_lang']}"
                    if config["data"].get("source_lang") else config["data"]["name"]),
      "dataset": config["data"]["name"],
      "tokenizer": config["tokenizer"]["kind"],
      "vocab_size": config["tokenizer"]["vocab_size"],
      "max_length": config["pipeline"]["max_source_len"],
      "seed": config["train"]["seed"],
      "max_minutes": config["train"]["max_minutes"],
      "precision": config["train"]["precision"],
      "train": {"steps": summary["steps"], "train_seconds": summary.get("train_seconds"),
                "cpu_seconds": summary.get("cpu_seconds"),
                "best_valid_bleu": summary["best_bleu"], "stopped": summary["stopped"]},
      "test_sentences": next(iter(scores.values()))["sentences"],
      "scores": scores,
      "validation": validation_points(*validations(FLAGS.run_dir)),
      "evaluate_seconds": round(time.time() - start, 1),
      "machine": _machine(),
      "date": datetime.date.today().isoformat(),
  }
  path = os.path.join(FLAGS.run_dir, ROW_FILE)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(row, f, indent=2, sort_keys=True)
  os.replace(path + ".tmp", path)
  print(f"\nrow written to {path}: " + ", ".join(
      f"{k} BLEU {v['bleu']:.2f}" for k, v in scores.items()))
  return 0
