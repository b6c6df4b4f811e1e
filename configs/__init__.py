"""Experiment recipes: `configs/<model>_<dataset>.py`, each a `get_config()` for `--config`.

An installed nmt_tf ships them as the package `nmt_tf.configs`, so `nmt-tf train
--config=cgru_multi30k` finds a recipe by its name.
"""
