"""`python run.py report`: gathers the rows of `run.py results` into the results report.

  python run.py report [--report_runs=runs/results] [--report_file=docs/RESULTS.md]

Reads the rows of --report_runs and the rows already published in --report_published (a row
still in a run directory wins), publishes the former into --report_published (results.json
with the validation curve, test hypotheses, their BLEU/chrF statistics per sentence, attention
maps: small files meant for git, so that a clone without the run directories can redraw the
report), then rewrites only the part of --report_file between its two marker lines (tables,
paired tests, signatures, commands) and draws the figures into --report_figures, where it
deletes the figures of earlier reports it no longer draws (curves*.png, bleu_by_length*.png,
attention*.png at its top level: the directory's figures are the report's). Rows
evaluated before the statistics were kept get them from their hypotheses and the references
of their config (a warning when these cannot be read), and rows evaluated before BLEU's length
ratio was kept get it from these statistics.
"""

import os
import sys

from absl import flags

from nmt_tf.cli.common import PROJECT_ROOT

COMMAND = "report"
HELP = "Write docs/RESULTS.md from the results rows (tables, curves, BLEU by length, maps)."

DEFAULT_RUNS = os.path.join(PROJECT_ROOT, "runs", "results")
flags.DEFINE_list("report_runs", [DEFAULT_RUNS],
                  "Run directories with results.json, or directories holding them.")
flags.DEFINE_string("report_published", os.path.join(PROJECT_ROOT, "docs", "results", "rows"),
                    "Directory of the published rows (kept in git); empty: neither read nor "
                    "publish.")
flags.DEFINE_string("report_file", os.path.join(PROJECT_ROOT, "docs", "RESULTS.md"),
                    "Markdown report to update.")
flags.DEFINE_string("report_figures", os.path.join(PROJECT_ROOT, "docs", "results"),
                    "Directory for the report's figures (its curves*, bleu_by_length* and "
                    "attention*.png that the report no longer draws are deleted).")

FLAGS = flags.FLAGS


def run(argv):
  # pylint: disable=g-import-not-at-top
  from nmt_tf.data import DataError
  from nmt_tf.evaluation.results import (add_length_ratio, add_statistics, load_rows, publish,
                                         write_report)
  if argv:
    print(f"error: report takes no positional arguments; received {argv}; pass "
          "--report_runs.", file=sys.stderr)
    return 2
  missing = [p for p in FLAGS.report_runs if not os.path.isdir(p) and p != DEFAULT_RUNS]
  if missing:
    print(f"error: no such run directory: {', '.join(missing)}; pass existing ones with "
          "--report_runs.", file=sys.stderr)
    return 2
  published = FLAGS.report_published
  rows = load_rows(FLAGS.report_runs + ([published] if published else []))
  for row in rows:  # rows evaluated before sentence statistics were kept get them now
    try:
      add_statistics(row)
    except DataError as error:
      print(f"warning: no sentence statistics for {row['name']} (its test references: "
            f"{error}); its paired tests show n/a.", file=sys.stderr)
    add_length_ratio(row)  # rows evaluated before BLEU's length ratio was kept get it here
  fresh = 0
  if published:
    for row in rows:  # a row read from `published` stays where it is
      target = publish(row, published)
      fresh += target != row["run_dir"]
      row["run_dir"] = target  # the report links the published files
  write_report(rows, FLAGS.report_file, FLAGS.report_figures)
  print(f"{len(rows)} rows written to {FLAGS.report_file} (figures in "
        f"{FLAGS.report_figures})" + (f"; {fresh} published to {published}." if published
                                      else "."))
  return 0
