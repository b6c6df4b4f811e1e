"""`python -m nmt_tf COMMAND [--flags]`: the `nmt-tf` command (nmt_tf/cli/app.py)."""

from nmt_tf.cli.app import run

if __name__ == "__main__":
  run()
