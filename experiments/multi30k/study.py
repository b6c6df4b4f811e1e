"""The Multi30k study: train and evaluate a row, record it, draw docs/RESULTS.md from records.

  python experiments/multi30k/study.py row NAME --config=CONFIG [--baseline=ROW] \
      [--run_dir=DIR] [--note=TEXT] [--keep_attention] [-- TRAIN_FLAGS...]
  python experiments/multi30k/study.py record NAME --run_dir=DIR --command=TEXT \
      [--baseline=ROW] [--note=TEXT] [--keep_attention]
  python experiments/multi30k/study.py report [--rows=DIR] [--page=FILE] [--figures=DIR]

`row` runs, through the `nmt-tf` command line, `train` (resumable: run it again after an
interruption) and `evaluate` of the best checkpoint on the test split with greedy search and
beam 5, then `record`. A row already recorded is skipped. `record` writes the immutable record
rows/NAME/ (records.py) of a run directory; `report` rewrites the generated part of
docs/RESULTS.md and its figures (page.py) from the records alone. Errors are one line and exit
code 2.
"""

import argparse
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
# pylint: disable=wrong-import-position
import page
import records

ROWS = os.path.join(HERE, "rows")


def multi30k_dir():
  """The Multi30k files: $NMT_TF_MULTI30K_DIR, else the shared copy beside the checkout if it
  exists (where `nmt-tf` looks too), else None."""
  if os.environ.get("NMT_TF_MULTI30K_DIR"):
    return os.environ["NMT_TF_MULTI30K_DIR"]
  shared = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
  return shared if os.path.isdir(shared) else None


def _nmt_tf(args):
  """Runs `python -m nmt_tf ARGS`; its exit code."""
  command = [sys.executable, "-m", "nmt_tf"] + args
  print("$ " + shlex.join(["nmt-tf"] + args), flush=True)
  return subprocess.call(command)


def _record(args, command):
  record = records.from_run(args.run_dir, args.name, command, args.baseline, args.note)
  path = records.write(record, args.run_dir, args.rows, args.keep_attention)
  print(f"recorded {path}: " + ", ".join(
      f"{key} BLEU {entry['bleu']:.2f}" for key, entry in record["scores"].items()))
  return 0


def row(args):
  if os.path.exists(os.path.join(args.rows, args.name)):
    print(f"{args.name}: recorded already ({os.path.join(args.rows, args.name)}); skipped.")
    return 0
  if args.baseline and not os.path.exists(os.path.join(args.rows, args.baseline)):
    raise records.RecordError(f"--baseline={args.baseline} has no record in {args.rows}; run "
                              "that row first.")
  args.run_dir = args.run_dir or os.path.join("runs", "study", args.name)
  extra = args.flags
  code = _nmt_tf(["train", f"--config={args.config}", f"--run_dir={args.run_dir}"] + extra)
  if code:
    return code
  for key, beam in records.SEARCHES.items():
    code = _nmt_tf(["evaluate", f"--run_dir={args.run_dir}", "--checkpoint=best",
                    "--eval_split=test", f"--beam_size={beam}",
                    f"--eval_dir={os.path.join(args.run_dir, 'eval', f'test_{key}')}"])
    if code:
      return code
  command = shlex.join(["nmt-tf", "train", f"--config={args.config}",
                        f"--run_dir={args.run_dir}"] + extra)
  return _record(args, command)


def report(args):
  body = page.write_page(records.load(args.rows), args.page, args.figures, args.references)
  print(f"{args.page}: {body.count(chr(10))} generated lines, figures in {args.figures}")
  return 0


def parser():
  main = argparse.ArgumentParser(prog="study.py", description=__doc__.split("\n", 1)[0])
  sub = main.add_subparsers(dest="command", required=True)
  for name in ("row", "record"):
    p = sub.add_parser(name)
    p.add_argument("name")
    p.add_argument("--run_dir", required=name == "record")
    p.add_argument("--baseline", help="The row this one is compared with.")
    p.add_argument("--note", help="A sentence the results page prints under the table.")
    p.add_argument("--keep_attention", action="store_true",
                   help="Also keep the beam-5 attention maps of the first test sentences.")
    p.add_argument("--rows", default=ROWS, help="Where records live.")
    if name == "row":
      p.add_argument("--config", required=True)
    else:
      p.add_argument("--command", dest="train_command", required=True,
                     help="The command that trained the run.")
  p = sub.add_parser("report")
  p.add_argument("--rows", default=ROWS)
  p.add_argument("--page", default=os.path.join(ROOT, "docs", "RESULTS.md"))
  p.add_argument("--figures", default=os.path.join(ROOT, "docs", "results"))
  p.add_argument("--references", default=multi30k_dir(),
                 help="The Multi30k files, for the lowercased BLEU of records made before "
                      "`nmt-tf evaluate` reported it (default: $NMT_TF_MULTI30K_DIR or the "
                      "shared copy).")
  return main


def main(argv=None):
  argv = sys.argv[1:] if argv is None else list(argv)
  extra = argv[argv.index("--") + 1:] if "--" in argv else []  # flags for `nmt-tf train`
  args = parser().parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
  args.flags = extra
  try:
    if args.command == "row":
      return row(args)
    if args.command == "record":
      return _record(args, args.train_command)
    return report(args)
  except records.RecordError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
