"""`python run.py report`: gathers the rows of `run.py results` into the results report.

  python run.py report [--report_runs=runs/results] [--report_file=docs/RESULTS.md]

Rewrites only the part of --report_file between its two marker lines (tables, signatures,
commands) and draws the figures into --report_figures.
"""

import os
import sys

from absl import flags

from nmt_tf.cli.common import PROJECT_ROOT

COMMAND = "report"
HELP = "Write docs/RESULTS.md from the results rows (tables, curves, BLEU by length, maps)."

flags.DEFINE_list("report_runs", [os.path.join(PROJECT_ROOT, "runs", "results")],
                  "Run directories with results.json, or directories holding them.")
flags.DEFINE_string("report_file", os.path.join(PROJECT_ROOT, "docs", "RESULTS.md"),
                    "Markdown report to update.")
flags.DEFINE_string("report_figures", os.path.join(PROJECT_ROOT, "docs", "results"),
                    "Directory for the report's figures.")

FLAGS = flags.FLAGS


def run(argv):
  from nmt_tf.evaluation.results import load_rows, write_report  # pylint: disable=g-import-not-at-top
  if argv:
    print(f"report takes no positional arguments; received {argv}.", file=sys.stderr)
    return 2
  missing = [p for p in FLAGS.report_runs if not os.path.isdir(p)]
  if missing:
    print(f"error: no such run directory: {', '.join(missing)}; pass existing ones with "
          "--report_runs.", file=sys.stderr)
    return 1
  rows = load_rows(FLAGS.report_runs)
  write_report(rows, FLAGS.report_file, FLAGS.report_figures)
  print(f"{len(rows)} rows written to {FLAGS.report_file} (figures in "
        f"{FLAGS.report_figures}).")
  return 0
