"""`python run.py average`: a checkpoint whose weights are the mean of the last N.

  python run.py average --run_dir=R --average_last=5
  python run.py translate --run_dir=R --checkpoint=R/averaged/ckpt-avg ...

Checkpoint averaging (Vaswani et al. 2017, Sec. 6.1; Junczys-Dowmunt et al. 2016):
theta = (1/N) sum_n theta_n over the N most recent checkpoints of RUN/checkpoints (or the
prefixes of --checkpoints). The result holds the model only, written with
tf.train.Checkpoint(model=...) like RUN/best, so RunDir.load_model(prefix) loads it.

The output goes through nmt_tf/write_path.py: it is refused before any work when it lies in
the run's best/, checkpoints/ or export/ folders, or holds a checkpoint that is not an
earlier average; it is written staged and renamed into place, and recorded in the run's
manifest when it lies inside the run.
"""

import contextlib
import os
import sys

from absl import flags
import numpy as np
import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.cli import common  # pylint: disable=unused-import  (defines --checkpoints)
from nmt_tf.experiment import checkpoint_files, RunDir, RunDirError
from nmt_tf.experiment.run_dir import CHECKPOINT_ERRORS, restore_model
from nmt_tf.models import build_model

COMMAND = "average"

flags.DEFINE_integer("average_last", 5, "Number of most recent checkpoints to average.")
flags.DEFINE_string("average_output", None, "Prefix of the new checkpoint; default "
                    "RUN_DIR/averaged/ckpt-avg.")

FLAGS = flags.FLAGS


def last_checkpoints(run, count):
  """The `count` most recent checkpoint prefixes of run.checkpoint_dir (oldest first)."""
  if count < 1:
    raise RunDirError(f"Received --average_last={count}; expected a positive integer.")
  paths = checkpoint_files.candidates(run.checkpoint_dir)[::-1]  # oldest first
  if not paths:
    raise RunDirError(f"No checkpoint in {run.checkpoint_dir}; train first with "
                      f"`nmt-tf train --run_dir={run.path}`.")
  return paths[-count:]


def average_checkpoints(run, paths, output_prefix):
  """Writes the mean of the model weights of `paths` to `output_prefix`; returns its path.

  Every checkpoint is restored into one model; float variables are averaged, others
  (if any) taken from the last checkpoint.
  """
  config = run.load_config()
  model = build_model(config.model)
  sums = None
  for path in paths:
    run.checkpoint_path(path)  # RunDirError naming a missing prefix
    restore_model(model, path, "leave it out of --checkpoints or lower --average_last")
    values = [v.numpy() for v in model.weights]
    sums = values if sums is None else [
        s + v if np.issubdtype(v.dtype, np.floating) else v for s, v in zip(sums, values)]
  for variable, total in zip(model.weights, sums):
    if np.issubdtype(total.dtype, np.floating):
      variable.assign(total / len(paths))
  checkpoint = tf.train.Checkpoint(model=model)
  _ = checkpoint.save_counter  # created, so RunDir.load_model finds every object it expects
  written = write_path.write_checkpoint(checkpoint, output_prefix)
  write_path.write_json(output_prefix + AVERAGE_RECORD, {"averaged": list(paths)})
  run.record_checkpoint(written)
  return written


# Beside an average: what it averages, which marks it as one (an average may replace another).
AVERAGE_RECORD = ".average.json"


def check_output(output_prefix, inputs):
  """WriteError unless `output_prefix` may receive an average (before any work)."""
  if any(os.path.abspath(output_prefix) == os.path.abspath(p) for p in inputs):
    raise write_path.WriteError(f"--average_output={output_prefix} is one of the checkpoints "
                                "averaged; write the average to a new prefix.")
  earlier_average = os.path.exists(output_prefix + AVERAGE_RECORD)  # may be replaced
  write_path.check_output(output_prefix, "--average_output", replace_model=earlier_average,
                          create_parent=True)


def run(argv):
  if argv:
    print(f"error: average takes no positional arguments; received {argv}; pass "
          "--checkpoints or --average_last.", file=sys.stderr)
    return 2
  run_dir = RunDir(FLAGS.run_dir)
  try:
    paths = ([p.strip() for p in FLAGS.checkpoints if p.strip()] or
             last_checkpoints(run_dir, FLAGS.average_last))
    output = FLAGS.average_output or os.path.join(run_dir.averaged_dir, "ckpt-avg")
    run_dir.load_config()  # RunDirError for a directory that is no run, before the checks
    check_output(output, paths)
    inside = not os.path.relpath(os.path.abspath(output), run_dir.path).startswith(os.pardir)
    with run_dir.writing() if inside else contextlib.nullcontext():  # the run's one lock
      written = average_checkpoints(run_dir, paths, output)
  except (RunDirError, ValueError) + CHECKPOINT_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(f"averaged {len(paths)} checkpoints ({', '.join(os.path.basename(p) for p in paths)})"
        f" into {written}\nuse it with --checkpoint={written}")
  return 0
