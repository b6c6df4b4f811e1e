"""nmt_tf command line from a checkout: `python run.py COMMAND [--flags]`, the same as the
installed `nmt-tf` command (nmt_tf/cli/app.py)."""

from nmt_tf.cli.app import run

if __name__ == "__main__":
  run()
