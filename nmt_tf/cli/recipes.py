"""`nmt-tf recipes`: the recipes that --config names, and the model presets.

  nmt-tf recipes
  nmt-tf train --config=multi30k:luong --run_dir=runs/multi30k_luong
"""

from nmt_tf import configs

COMMAND = "recipes"


def run(argv):
  del argv  # no flags of its own
  print("\n".join(configs.listing()))
  return 0
