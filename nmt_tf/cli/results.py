"""`python run.py results`: one row of docs/RESULTS.md. Trains --config in --run_dir (resumable,
within the config's train.max_minutes), then evaluates the best checkpoint on the test split
with greedy search and with beam search, and writes RUN/results.json.

  python run.py results --config=configs/cgru_multi30k.py --run_dir=runs/results/cgru_de-en
  python run.py results --config=configs/cgru_multi30k.py --run_dir=runs/results/cgru_en-de \
      --config.data.source_lang=en --config.data.target_lang=de

The evaluations go to RUN/eval/test_greedy and RUN/eval/test_beam5 (see `run.py evaluate`);
`python run.py report` gathers the rows into docs/RESULTS.md. RUN/machine.json keeps the machine
the row began on (nmt_tf/cpu.py): a row's time budget belongs to one machine, so resuming on
another is refused unless --results_other_machine.
"""

import datetime
import json
import os
import sys
import time

from absl import flags

from nmt_tf import cpu
from nmt_tf.atomic_write import write_json, write_text
from nmt_tf.cli import evaluate, train

COMMAND = "results"
HELP = "One results row: train (time budget), evaluate greedy and beam 5, write results.json."

flags.DEFINE_list("results_beams", ["1", "5"], "Beam sizes to evaluate (1 = greedy).")
flags.DEFINE_bool("results_other_machine", False,
                  "Resume a row that began training on another machine (RUN/machine.json); "
                  "its time budget then mixes the two machines' speeds.")

FLAGS = flags.FLAGS
MACHINE_FILE = "machine.json"


def _training_machine(run_dir):
  """The machine record of this run, kept in RUN/machine.json from its first start:
  {"machine": label (nmt_tf/cpu.py), "cpu": cpu_id (if recorded), "date", "resumed_on":
  [machine names] if any}. None (after printing why) when the run began on another machine,
  another label or, under one label, another CPU id: a row's time budget must not mix machines,
  unless --results_other_machine. Records without a CPU id (written before it was recorded)
  name an unknown VM, so they resume only with that flag (cpu.recorded_here).
  """
  here, here_cpu = cpu.machine_label(), cpu.cpu_id()
  if not run_dir:
    return {"machine": here}  # `train` names the missing --run_dir
  path = os.path.join(run_dir, MACHINE_FILE)
  name = cpu.machine_name(here, here_cpu)
  if os.path.isfile(path):
    record = _read(path)
    here_before = name in record.get("resumed_on", [])  # resumed here once, when asked
    if here_before or cpu.recorded_here(record["machine"], record.get("cpu")):
      return record
    if not FLAGS.results_other_machine:
      print(f"error: {run_dir} began training on "
            f"\"{cpu.machine_name(record['machine'], record.get('cpu'))}\", this machine is "
            f"\"{name}\": its time budget would mix machines; move the directory aside to "
            "train the row here from the start, or pass --results_other_machine to resume it "
            "anyway.", file=sys.stderr)
      return None
    record.setdefault("resumed_on", []).append(name)  # the row's results.json lists them
  else:
    record = {"machine": here, "cpu": here_cpu, "date": datetime.date.today().isoformat()}
    if os.path.isfile(os.path.join(run_dir, "config.json")):
      record["recorded_at_resume"] = True  # a run begun before machine.json existed
    os.makedirs(run_dir, exist_ok=True)
  write_text(path, json.dumps(record))  # one line, as rows have always written it
  return record


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def run(argv):
  # pylint: disable=g-import-not-at-top
  from nmt_tf.evaluation.results import (model_label, ROW_FILE, scores_entry, training_speed,
                                         validation_points, validations)
  if argv:
    print(f"error: results takes no positional arguments; received {argv}.", file=sys.stderr)
    return 2
  try:
    beams = [int(b) for b in FLAGS.results_beams]
  except ValueError:
    beams = [0]
  if not beams or min(beams) < 1:
    print(f"error: Received --results_beams={FLAGS.results_beams}; expected beam sizes >= 1 "
          "such as 1,5.", file=sys.stderr)
    return 2
  machine = _training_machine(FLAGS.run_dir)  # RUN/machine.json: "machine", "cpu", ...
  if machine is None:
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
                "best_valid_bleu": summary["best_bleu"], "stopped": summary["stopped"],
                "progress": training_speed(FLAGS.run_dir)},  # median tokens/s, readings
      "test_sentences": next(iter(scores.values()))["sentences"],
      "scores": scores,
      "validation": validation_points(*validations(FLAGS.run_dir)),
      "evaluate_seconds": round(time.time() - start, 1),
      "machine": machine["machine"],
      "cpu": machine.get("cpu"),  # family, model, stepping where it started (None: unrecorded)
      "date": datetime.date.today().isoformat(),
  }
  if machine.get("resumed_on"):
    row["resumed_on"] = machine["resumed_on"]  # --results_other_machine: trained on these too
  path = os.path.join(FLAGS.run_dir, ROW_FILE)
  write_json(path, row)
  print(f"\nrow written to {path}: " + ", ".join(
      f"{k} BLEU {v['bleu']:.2f}" for k, v in scores.items()))
  return 0
