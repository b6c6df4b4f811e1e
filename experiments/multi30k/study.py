"""The Multi30k study: train and evaluate a row, record it, draw docs/RESULTS.md from records.

  python experiments/multi30k/study.py row NAME --config=CONFIG [--baseline=ROW] \
      [--run_dir=DIR] [--note=TEXT] [--keep_attention] [-- TRAIN_FLAGS...]
  python experiments/multi30k/study.py record NAME --run_dir=DIR --command=TEXT \
      [--baseline=ROW] [--note=TEXT] [--keep_attention]
  python experiments/multi30k/study.py variant NAME --of=ROW --run_dir=DIR \
      [--average_last=N] [--ensemble=DIR,DIR] [--beam_size=K] [--length_penalty=A] [--note=TEXT]
  python experiments/multi30k/study.py tune --run_dir=DIR [--average_last=N] \
      [--ensemble=DIR,DIR] [--beams=5,8,12] [--length_penalties=0.4,0.6,0.8,1.0,1.2]
  python experiments/multi30k/study.py report [--rows=DIR] [--page=FILE] [--figures=DIR]

`row` runs, through the `nmt-tf` command line, `train` (resumable: run it again after an
interruption) and `evaluate` of the best checkpoint on the test split with greedy search and
beam 5, then `record`. A row already recorded is skipped; a row whose train.precision=auto would
give other matrix products on this machine than its baseline was trained with is refused before
training. `variant` records another decoding of a recorded row's run, compared with that row:
the mean of its last N checkpoints (`nmt-tf average`), an ensemble with other runs, or other
search settings. `tune` scores a grid of beam sizes and length penalties on the validation split
(never the test split) and prints the best. `record` writes the immutable record rows/NAME/
(records.py) of a run directory; `report` rewrites the generated part of docs/RESULTS.md and its
figures (page.py) from the records alone. Errors are one line and exit code 2.
"""

import argparse
import json
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

import nmt_tf
from nmt_tf import console
from nmt_tf import cpu

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
  record = records.from_run(args.run_dir, args.name, command, args.baseline, args.note,
                            target_lang=args.target_lang)
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
  if args.baseline:
    _check_precision(args)
  code = _nmt_tf(["train", f"--config={args.config}", f"--run_dir={args.run_dir}"] + extra)
  if code:
    return code
  for key, beam in records.SEARCHES.items():
    language = [f"--target_lang={args.target_lang}"] if args.target_lang else []
    code = _nmt_tf(["evaluate", f"--run_dir={args.run_dir}", "--checkpoint=best",
                    "--eval_split=test", f"--beam_size={beam}",
                    f"--eval_dir={os.path.join(args.run_dir, 'eval', f'test_{key}')}"]
                   + language)
    if code:
      return code
  command = shlex.join(["nmt-tf", "train", f"--config={args.config}",
                        f"--run_dir={args.run_dir}"] + extra)
  return _record(args, command)


def _train_precision(args):
  """train.precision as the row's training would read it: the last --config.train.precision
  flag, else the run directory's config.json (a resumed run), else the --config's; None when
  the --config cannot be loaded (`nmt-tf train` then says why)."""
  flag = "--config.train.precision="
  given = [f[len(flag):] for f in args.flags if f.startswith(flag)]
  if given:
    return given[-1]
  saved = os.path.join(args.run_dir, "config.json")
  if os.path.exists(saved):
    return records.read_json(saved)["train"]["precision"]
  try:
    with console.native_stderr_silenced():  # the recipes import TensorFlow, whose start-up lines go
      config = nmt_tf.recipe(args.config)  # a recipe or a config file, as --config reads it
    return config.train.precision
  except Exception:  # pylint: disable=broad-except  (`nmt-tf train` reports it in one line)
    return None


def _check_precision(args):
  """Refuses a row whose train.precision=auto would resolve, on this machine, to other matrix
  products than its baseline was trained with: the comparison would change two settings. An
  explicit train.precision is the row's own choice (the float32 row compares precisions)."""
  precision = _train_precision(args)
  if precision != "auto":
    return
  trained = records.trained_precision(
      records.read_json(os.path.join(args.rows, args.baseline, records.ROW_FILE)))
  resolved, reason = cpu.resolve_precision(precision)
  if trained in (None, "auto") or resolved == trained:
    return
  slower = (" (this CPU emulates bfloat16 products, slower than float32: docs/PERFORMANCE.md)"
            if cpu.native_bf16() is False else "")
  raise records.RecordError(
      f"{args.name} would train with precision {resolved} ({reason}), its baseline "
      f"{args.baseline} with {trained}: run it where auto gives {trained}, or pass "
      f"--config.train.precision={trained} after --{slower}.")


def _decoding(args, label):
  """(evaluate flags, description) of a variant's checkpoint: the run's best, the mean of its
  last N checkpoints (made once, under RUN/averaged/LABEL/), or an ensemble with other runs."""
  flags, decoding = [], {}
  if args.average_last:
    prefix = os.path.join(args.run_dir, "averaged", label, "ckpt-avg")
    if not os.path.exists(prefix + ".index"):
      code = _nmt_tf(["average", f"--run_dir={args.run_dir}",
                      f"--average_last={args.average_last}", f"--average_output={prefix}"])
      if code:
        raise records.RecordError(f"nmt-tf average failed with exit code {code}; see above.")
    flags.append(f"--checkpoint={prefix}")
    decoding["average_last"] = args.average_last
  if args.ensemble:
    members = [args.run_dir] + [m for m in args.ensemble.split(",") if m]
    flags.append("--checkpoints=" + ",".join(members))
    decoding["ensemble"] = members
  return flags, decoding


def _evaluate(args, eval_dir, split, beam, length_penalty, flags):
  """`nmt-tf evaluate` into eval_dir unless its report is there; the report."""
  path = os.path.join(eval_dir, "report.json")
  if not os.path.exists(path):
    extra = [] if length_penalty is None else [f"--length_penalty={length_penalty}"]
    code = _nmt_tf(["evaluate", f"--run_dir={args.run_dir}", f"--eval_split={split}",
                    f"--beam_size={beam}", f"--eval_dir={eval_dir}"] + flags + extra)
    if code:
      raise records.RecordError(f"nmt-tf evaluate failed with exit code {code}; see above.")
  return records.read_json(path)


def variant(args):
  if os.path.exists(os.path.join(args.rows, args.name)):
    print(f"{args.name}: recorded already ({os.path.join(args.rows, args.name)}); skipped.")
    return 0
  base = os.path.join(args.rows, args.of)
  if not os.path.exists(base):
    raise records.RecordError(f"--of={args.of} has no record in {args.rows}; run that row "
                              "first.")
  flags, decoding = _decoding(args, args.name)
  eval_root = os.path.join(args.run_dir, "eval", args.name)
  for key, beam in records.SEARCHES.items():
    searched = beam if key == "greedy" else (args.beam_size or beam)
    _evaluate(args, os.path.join(eval_root, f"test_{key}"), "test", searched,
              None if key == "greedy" else args.length_penalty, flags)
  if args.beam_size:
    decoding["beam_size"] = args.beam_size
  if args.length_penalty is not None:
    decoding["length_penalty"] = args.length_penalty
  decoding["command"] = shlex.join(["python", "experiments/multi30k/study.py"] + args.argv)
  trained_by = records.read_json(os.path.join(base, records.ROW_FILE))["command"]
  record = records.from_run(args.run_dir, args.name, trained_by, args.of, args.note, eval_root)
  record["decoding"] = decoding
  path = records.write(record, args.run_dir, args.rows, eval_root=eval_root)
  print(f"recorded {path}: " + ", ".join(
      f"{key} BLEU {entry['bleu']:.2f}" for key, entry in record["scores"].items()))
  return 0


def tune(args):
  """Validation BLEU of every beam size and length penalty of the grid; prints the best."""
  # One directory per decoded model, so that a grid is never taken from another model's.
  members = [os.path.basename(os.path.normpath(m)) for m in args.ensemble.split(",") if m]
  label = "tune" + (f"_avg{args.average_last}" if args.average_last else "") + (
      "_with_" + "+".join(members) if members else "")
  flags, decoding = _decoding(args, label)
  results = []
  for beam in (int(b) for b in args.beams.split(",")):
    for penalty in (float(a) for a in args.length_penalties.split(",")):
      report = _evaluate(args, os.path.join(args.run_dir, "eval", label,
                                            f"valid_beam{beam}_lp{penalty:g}"),
                         "valid", beam, penalty, flags)
      results.append({"beam_size": beam, "length_penalty": penalty, "bleu": report["bleu"],
                      "chrf": report.get("chrf")})
  best = max(results, key=lambda r: r["bleu"])
  summary = {"split": "valid", **decoding, "results": results, "best": best}
  path = os.path.join(args.run_dir, "eval", label, "tune.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
  for r in results:
    print(f"beam {r['beam_size']:>2}  length penalty {r['length_penalty']:<4g}  "
          f"valid BLEU {r['bleu']:.2f}")
  print(f"best: beam {best['beam_size']}, length penalty {best['length_penalty']:g} "
        f"(valid BLEU {best['bleu']:.2f}); written to {path}")
  return 0


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
    p.add_argument("--target_lang", help="A run of several target languages (data.pairs): "
                   "the one this row evaluates (its other pairs are rows of their own, of the "
                   "same --run_dir).")
    if name == "row":
      p.add_argument("--config", required=True)
    else:
      p.add_argument("--command", dest="train_command", required=True,
                     help="The command that trained the run.")
  for name in ("variant", "tune"):
    p = sub.add_parser(name)
    if name == "variant":
      p.add_argument("name")
      p.add_argument("--of", required=True, help="The recorded row whose run is decoded.")
      p.add_argument("--note", help="A sentence the results page prints under the table.")
      p.add_argument("--beam_size", type=int, help="The beam of the beam row (default 5).")
      p.add_argument("--length_penalty", type=float,
                     help="GNMT alpha of the beam row (default: the run's).")
      p.add_argument("--rows", default=ROWS)
    else:
      p.add_argument("--beams", default="5,8,12")
      p.add_argument("--length_penalties", default="0.4,0.6,0.8,1.0,1.2")
    p.add_argument("--run_dir", required=True)
    p.add_argument("--average_last", type=int, default=0,
                   help="Decode the mean of the run's last N checkpoints.")
    p.add_argument("--ensemble", default="",
                   help="Other run directories decoded with this one as an ensemble.")
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
  args.flags, args.argv = extra, argv
  try:
    if args.command == "row":
      return row(args)
    if args.command == "record":
      return _record(args, args.train_command)
    if args.command == "variant":
      return variant(args)
    if args.command == "tune":
      return tune(args)
    return report(args)
  except records.RecordError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
