"""Experiment recipes: `nmt_tf/configs/<model>_<dataset>.py` (configs/ in a checkout), each a
`get_config()` for `--config`; `nmt-tf train --config=cgru_multi30k` finds a recipe by its
name."""
