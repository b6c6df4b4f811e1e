"""nmt_tf command line: `python run.py COMMAND [--flags]`.

Commands are the modules of nmt_tf/cli (train, translate, evaluate, score, export, ...);
`python run.py help` lists them. This file only dispatches.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top

from nmt_tf import cli  # pylint: disable=g-import-not-at-top

try:
  COMMANDS = cli.commands()
except (AttributeError, KeyError, TypeError, ValueError) as _error:
  # ml_collections applies --config.KEY=VALUE overrides while the flag is defined.
  _override = next((a for a in sys.argv if a.startswith("--config.")), "--config.*")
  _reason = _error
  while isinstance(_reason, BaseException) and _reason.args:
    _reason = _reason.args[0]
  _reason = " ".join(str(_reason).replace("'", "").split())
  print(f"error: invalid config override {_override} (unknown key {_reason}); check the "
        "section and key names in nmt_tf/experiment/config.py.", file=sys.stderr)
  sys.exit(2)


def _usage():
  lines = ["usage: python run.py COMMAND [--flags]   (--helpfull lists every flag)", "",
           "commands:"]
  lines += [f"  {name:<10} {module.HELP}" for name, module in sorted(COMMANDS.items())]
  return "\n".join(lines)


def main(argv):
  # TensorFlow's own INFO lines (saver, SavedModel builder) drown the progress output; nmt_tf's
  # absl logging stays at the --verbosity level.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel("WARNING")
  if len(argv) < 2 or argv[1] in ("help", "-h"):
    print(_usage())
    return 0 if len(argv) >= 2 else 2
  command = argv[1]
  if command not in COMMANDS:
    print(f"Unknown command {command!r}.\n\n{_usage()}", file=sys.stderr)
    return 2
  return COMMANDS[command].run(argv[2:]) or 0


if __name__ == "__main__":
  app.run(main)
