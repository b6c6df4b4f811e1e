"""`python run.py main`: the quick-start job — train, evaluate on the test split, export.

  python run.py main --run_dir=runs/quickstart [--config=generated:cgru]

Each stage is the command of the same name with the same flags; rerunning resumes training
from the last checkpoint, then evaluates and exports the best checkpoint again.
"""

import sys
import time

from nmt_tf.cli import evaluate, export, train

COMMAND = "main"


def run(argv):
  if argv:
    print(f"main takes no positional arguments; received {argv}.", file=sys.stderr)
    return 2
  for name, module in (("train", train), ("evaluate", evaluate), ("export", export)):
    start = time.time()
    print(f"\n=== {name} ===", flush=True)
    code = module.run([])
    if code:
      print(f"error: the {name} stage failed (exit {code}); fix the error above and rerun "
            "`nmt-tf main` with the same flags (training resumes).", file=sys.stderr)
      return code
    print(f"=== {name} done in {time.time() - start:.0f} s ===", flush=True)
  return 0
