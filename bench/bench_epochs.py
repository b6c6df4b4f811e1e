"""Training speed across epoch boundaries: target tokens/s of the whole `nmt-tf train` loop,
tf.data included, for one or more checkouts run in turn.

Usage: .venv/bin/python bench/bench_epochs.py
           --pythons=/old/checkout/.venv/bin/python,/new/checkout/.venv/bin/python
           [--config=multi30k:cgru] [--steps 320] [--rounds 2] [--work_dir /tmp/bench_epochs]
           [-- --config.pipeline.subword_alpha=0.1 --config.pipeline.subword_nbest=64]
Each interpreter of --pythons trains its own checkout's nmt_tf (`python -m nmt_tf train`) from
scratch for --steps steps, validating only after the last one; the rounds take the
interpreters in turn (A, B, A, B, ...), so that a VM whose speed drifts treats them alike.
The speed of a run is read from its TensorBoard: the target tokens of the steps after the
first logged window (`train/tokens_per_sec` times the window's time) over the time from that
window's end to the last one's, so the set-up, the first epoch's preparation and the final
validation do not enter it. The recipe's Multi30k epoch is about 137 steps (more with
subword regularization, whose pieces are longer), so the default 320 steps cross two epoch
boundaries, where the data pipeline starts a new epoch (bench/bench_train.py times the step
alone, bench/bench_data.py the pipeline alone).
Prints one JSON object: tokens/s of every run and the median per interpreter.
"""

import json
import os
import shutil
import subprocess
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import run_scalars  # pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_list("pythons", [sys.executable], "Interpreters, one per checkout to time.")
flags.DEFINE_string("config", "multi30k:cgru", "The run's --config.")
flags.DEFINE_integer("steps", 320, "Training steps per run.")
flags.DEFINE_integer("rounds", 2, "Runs per interpreter, taken in turn.")
flags.DEFINE_string("work_dir", "/tmp/bench_epochs", "Where the run directories go (emptied).")
FLAGS = flags.FLAGS


def windows(run_dir):
  """[(step, wall time, tokens/s)] of the run's `train/tokens_per_sec` events, by step."""
  return sorted((step, wall_time, rate)
                for tag, step, wall_time, rate in run_scalars.scalar_events(run_dir)
                if tag == "train/tokens_per_sec")


def tokens_per_second(rows):
  """Target tokens/s from the end of the first window to the end of the last."""
  tokens = sum(rate * (wall - previous_wall)
               for (_, previous_wall, _), (_, wall, rate) in zip(rows, rows[1:]))
  return tokens / (rows[-1][1] - rows[0][1])


def train(python, run_dir, overrides):
  """Trains one run; its windows."""
  shutil.rmtree(run_dir, ignore_errors=True)
  command = [python, "-m", "nmt_tf", "train", f"--config={FLAGS.config}",
             f"--run_dir={run_dir}", f"--config.train.steps={FLAGS.steps}",
             "--config.train.max_minutes=0", f"--config.train.eval_every={FLAGS.steps}",
             f"--config.train.checkpoint_every={FLAGS.steps}", *overrides]
  print("$", " ".join(command), file=sys.stderr, flush=True)
  # From the work directory: `-m` puts the working directory first on the path, and a
  # checkout there would shadow the interpreter's own.
  subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=FLAGS.work_dir)
  return windows(run_dir)


def main(argv):
  overrides = argv[1:]
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  runs = {python: [] for python in FLAGS.pythons}
  for round_index in range(FLAGS.rounds):
    for index, python in enumerate(FLAGS.pythons):
      rows = train(python, os.path.join(FLAGS.work_dir, f"run{index}_{round_index}"),
                   overrides)
      runs[python].append({"tokens_per_s": round(tokens_per_second(rows)),
                           "windows": [[step, round(rate)] for step, _, rate in rows]})
  print(json.dumps({
      "config": FLAGS.config, "overrides": overrides, "steps": FLAGS.steps,
      "runs": runs,
      "median_tokens_per_s": {p: round(common.median([r["tokens_per_s"] for r in rs]))
                              for p, rs in runs.items()},
  }, indent=2))


if __name__ == "__main__":
  app.run(main)
