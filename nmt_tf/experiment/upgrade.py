"""The one upgrade path of older run directories: a format version and named steps.

A run directory records the format it was written in as `run_format` in its manifest.json
(experiment/run_manifest.py); a run without one is of format 1. Opening a run applies, in
order, every step from its format to FORMAT, each a named function from format N to N + 1
of the run's config.json values:

  1 -> 2  `removed_settings`: decode.matmul_dtype and pipeline.reverse_source are no longer
          settings. Their values that mean what the current config does are dropped; any
          other is refused, naming the setting that replaces it.
  2 -> 3  `reinforce_section`: the REINFORCE settings of hard attention move from the train
          section to their own (train.reinforce_X -> reinforce.X,
          train.attention_entropy_weight -> reinforce.entropy_weight).

The steps run in memory whenever a run is opened (translate, evaluate, export, serve and
average read an older run as it is); training writes the run back in the current format.
A step changes only what an older format wrote, so every config goes through all of them: a
config that carries no format (a recipe, a dict given to the Python API), and a config.json
edited by hand with a setting of an older format, are read as that format's would be. The
format itself refuses a run written by a newer release, which this one would misread.

A field added to a section that fixes what the checkpoints mean (model, data, tokenizer)
after runs were recorded enters the manifest's checksum of those sections only when it is set
to something other than the value those runs trained with (LATER_FIELDS): the checksum of
every earlier run holds, and earlier releases read the runs of this one.
"""

from nmt_tf.models.config import ConfigError

FORMAT = 3

# (section, field): the value every run recorded before the field existed trained with.
LATER_FIELDS = {
    ("model", "hard_expectation_draw"): "sentence",
    ("data", "train_sample"): None,
    ("data", "train_sample_seed"): 0,
    ("data", "pairs"): None,
    ("data", "target_tags"): False,
}

# (section, key) of an earlier config.json that no section has any more: (the values that
# mean what the current config does, read and dropped; the setting to use for any other).
REMOVED_KEYS = {
    ("decode", "matmul_dtype"): ((None, "float32"), "decode.precision=float32_bf16_matmul"),
    ("pipeline", "reverse_source"): ((False,), "model.reverse_source=True (model.encoder="
                                               "'rnn'), and retrain"),
}

# train.<old key> -> reinforce.<new key>
REINFORCE_KEYS = {
    "reinforce_weight": "weight", "reinforce_samples": "samples",
    "reinforce_reward": "reward", "reinforce_baseline": "baseline",
    "reinforce_baseline_decay": "baseline_decay", "reinforce_normalize": "normalize",
    "reinforce_start": "start", "attention_entropy_weight": "entropy_weight",
}


def removed_settings(values):
  """Format 1 -> 2 (module docstring)."""
  for (section, key), (inert, instead) in REMOVED_KEYS.items():
    held = values.get(section)
    if not isinstance(held, dict) or key not in held:
      continue
    if held[key] not in inert:
      raise ConfigError(f"{section}.{key}={held[key]!r} is no longer a setting: delete it "
                        f"(from the run's config.json too) and set {instead}.")
    values[section] = {k: v for k, v in held.items() if k != key}
  return values


def reinforce_section(values):
  """Format 2 -> 3 (module docstring)."""
  train = values.get("train")
  if not isinstance(train, dict) or not set(train) & set(REINFORCE_KEYS):
    return values
  moved = {REINFORCE_KEYS[key]: value for key, value in train.items() if key in REINFORCE_KEYS}
  section = dict(values.get("reinforce") or {})
  clash = sorted(key for key in moved if key in section and section[key] != moved[key])
  if clash:
    raise ConfigError(f"The config sets both train.{_old(clash[0])} and reinforce.{clash[0]}; "
                      f"keep reinforce.{clash[0]} only.")
  values["train"] = {k: v for k, v in train.items() if k not in REINFORCE_KEYS}
  values["reinforce"] = {**moved, **section}
  return values


def _old(new_key):
  return next(old for old, new in REINFORCE_KEYS.items() if new == new_key)


STEPS = {1: removed_settings, 2: reinforce_section}  # format N -> N + 1


def check_format(run_format, where):
  """ConfigError unless this release reads runs of format `run_format`."""
  if not isinstance(run_format, int) or isinstance(run_format, bool) or run_format < 1:
    raise ConfigError(f"{where} records run_format={run_format!r}; expected a positive "
                      "integer: restore the run's manifest.json from a backup.")
  if run_format > FORMAT:
    raise ConfigError(f"{where} was written by a newer release of nmt_tf (run format "
                      f"{run_format}; this one reads up to {FORMAT}); upgrade nmt_tf "
                      "(pip install -U nmt_tf) to use it.")


def upgrade_config(values, run_format=1, where="the config"):
  """The config values (a dict of sections) of a run of format `run_format` in the current
  format (every step runs: module docstring).

  Raises:
    ConfigError: a value no step can carry over, or a format newer than this release's.
  """
  check_format(run_format, where)
  values = {name: dict(section) if isinstance(section, dict) else section
            for name, section in values.items()}
  for version in range(1, FORMAT):
    values = STEPS[version](values)
  return values
