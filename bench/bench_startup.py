"""Start-up of `nmt-tf translate`: the wall time of one sentence, against `import tensorflow`.

Usage: .venv/bin/python bench/bench_startup.py --run=RUN [--rounds 5] [--beams 5,1]
           [--trees=/old/checkout,/new/checkout] [--sentence "..."] [--lines 1]
Each round runs, for every checkout of --trees (default: this one) and every beam size,
`nmt-tf translate --run_dir=RUN --beam_size=B` on --lines copies of --sentence, in a new
process started in the checkout's directory (first on the path, so each checkout runs its own
nmt_tf with this interpreter's packages). The process imports tensorflow first and times it;
the figure is the time from there to the command's exit (its atexit handlers), so that the
import, which every command pays and which varies by a second between runs on a VM, does not
enter it. Rounds alternate the settings, so that a VM whose speed drifts treats them alike;
the median and range over the rounds are reported per setting.

--parts instead times the stages of one translate inside this process (this checkout only):
importing the command, loading the model (config, tokenizers, building, restoring), and the
first and second search of the sentence, as `nmt-tf translate` runs them.
Prints one JSON object.
"""

import os
import subprocess
import sys
import time

from absl import app
from absl import flags

flags.DEFINE_string("run", None, "A trained run to translate with (its --run_dir).",
                    required=True)
flags.DEFINE_integer("rounds", 5, "Rounds; each runs every setting once.")
flags.DEFINE_list("beams", ["5", "1"], "Beam sizes (1 = greedy).")
flags.DEFINE_list("trees", [], "Checkouts to compare (default: this one).")
flags.DEFINE_string("sentence", "Ein Mann fährt mit dem Fahrrad auf einer Straße.",
                    "The source sentence.")
flags.DEFINE_integer("lines", 1, "Copies of the sentence to translate.")
flags.DEFINE_bool("parts", False, "Time the stages in this process instead (see docstring).")
FLAGS = flags.FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Runs `nmt-tf ARGS` in this interpreter and writes, at exit, the seconds of its
# `import tensorflow` and of everything after it, to the file $STARTUP_TIMES.
_TIMED_COMMAND = """
import atexit, os, sys, time
start = time.perf_counter()
import tensorflow
imported = time.perf_counter()

def report():
  with open(os.environ["STARTUP_TIMES"], "w") as f:
    f.write(f"{imported - start} {time.perf_counter() - imported}")

atexit.register(report)
sys.argv = ["nmt-tf"] + sys.argv[1:]
from nmt_tf.cli.app import run
run()
"""


def timed(args, cwd, stdin):
  """(seconds of `import tensorflow`, seconds after it) of `nmt-tf ARGS` run in `cwd`."""
  out = "/tmp/nmt_tf_bench_startup_times"
  # Python's bytecode caches are kept, as after `pip install .` (which compiles them).
  env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
  env["STARTUP_TIMES"] = out
  subprocess.run([sys.executable, "-c", _TIMED_COMMAND, *args], cwd=cwd, input=stdin,
                 check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
  with open(out, encoding="utf-8") as f:
    return tuple(float(x) for x in f.read().split())


def spread(values):
  """Median and range of `values`, and the values in the order of the rounds."""
  ordered = sorted(values)
  return {"median": round(ordered[len(ordered) // 2], 3), "min": round(ordered[0], 3),
          "max": round(ordered[-1], 3), "runs": [round(v, 3) for v in values]}


def whole_commands():
  trees = FLAGS.trees or [ROOT]
  text = ("\n".join([FLAGS.sentence] * FLAGS.lines) + "\n").encode("utf-8")
  after = {f"{tree} beam {beam}": [] for tree in trees for beam in FLAGS.beams}
  imports = []
  for _ in range(FLAGS.rounds):
    for tree in trees:
      for beam in FLAGS.beams:
        imported, rest = timed(["translate", f"--run_dir={FLAGS.run}", f"--beam_size={beam}"],
                               tree, text)
        imports.append(imported)
        after[f"{tree} beam {beam}"].append(rest)
  return {"import_tensorflow_s": spread(imports),
          "translate_after_import_s": {k: spread(v) for k, v in after.items()}}


def parts():
  """Seconds of each stage of one translate in this process (Grappler off, as in the
  command: `common.decoding_command`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.list_physical_devices()
  times = {}
  start = time.perf_counter()
  from nmt_tf import cli  # pylint: disable=g-import-not-at-top
  cli.commands()
  from nmt_tf.cli import common as cli_common  # pylint: disable=g-import-not-at-top
  from nmt_tf.cli import translate  # pylint: disable=g-import-not-at-top
  times["import_commands"] = time.perf_counter() - start
  import dataclasses  # pylint: disable=g-import-not-at-top
  FLAGS.run_dir = FLAGS.run

  @cli_common.decoding_command
  def stages(argv):
    del argv
    for beam in FLAGS.beams:
      start = time.perf_counter()
      translator, _, decode, _ = translate.build_translator()
      times[f"beam {beam}: load_models"] = time.perf_counter() - start
      decode = dataclasses.replace(decode, beam_size=int(beam))
      for which in ("first", "second"):
        start = time.perf_counter()
        translate.decode_lines(translator, decode, [FLAGS.sentence] * FLAGS.lines)
        times[f"beam {beam}: {which} translation"] = time.perf_counter() - start

  stages([])
  return {k: round(v, 3) for k, v in times.items()}


def main(argv):
  del argv
  import json  # pylint: disable=g-import-not-at-top
  figures = parts() if FLAGS.parts else whole_commands()
  # After the timing: bench/common.py imports tensorflow and nmt_tf, which --parts times.
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import common  # pylint: disable=g-import-not-at-top
  report = {"device": common.device_info(), "run_dir": FLAGS.run, "lines": FLAGS.lines}
  report.update(figures)
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  sys.path.insert(0, ROOT)
  app.run(main)
