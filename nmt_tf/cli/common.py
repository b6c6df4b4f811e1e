"""Flags shared by several commands and the helpers that read them."""

import dataclasses
import functools
import os

from absl import flags
from ml_collections import config_flags

from nmt_tf import configs
from nmt_tf import write_path
from nmt_tf.data.errors import DataError
from nmt_tf.experiment import ExperimentConfig, RunDirError
from nmt_tf.models.config import ConfigError

flags.DEFINE_string("run_dir", os.path.join("runs", "quickstart"),
                    "Run directory: config, vocabularies, checkpoints, TensorBoard, exports "
                    "(default: the quick-start run that `main` trains).")
config_flags.DEFINE_config_file(
    "config", configs.recipe_path(configs.DEFAULT),
    "A recipe and model preset, RECIPE[:MODEL] (multi30k:luong; `nmt-tf recipes` lists them), "
    "or an experiment config file; override fields with --config.SECTION.KEY=VALUE. "
    "Used by `train`; other commands read the run's config.json.", lock_config=True)
flags.DEFINE_string("checkpoint", "best", "Checkpoint to use: best, last or a checkpoint prefix.")
flags.DEFINE_list("checkpoints", [], "Ensemble (translate, evaluate, export) or the checkpoints "
                  "to average (average): checkpoint prefixes of --run_dir and/or run "
                  "directories (their --checkpoint); log-probabilities are averaged.")
flags.DEFINE_string("target_lang", None, "A model trained with target-language tags "
                    "(data.target_tags): the language to translate into, e.g. fr (translate, "
                    "evaluate, score); evaluate without it reports each of the run's pairs.")
flags.DEFINE_integer("beam_size", None, "Beam size (1 = greedy); default: the config's.")
flags.DEFINE_integer("nbest", None, "Hypotheses per sentence; default: the config's.")
flags.DEFINE_float("length_penalty", None, "GNMT length penalty alpha; default: the config's.")
flags.DEFINE_float("coverage_penalty", None, "GNMT coverage penalty beta; default: the config's.")
flags.DEFINE_integer("decode_batch_size", None, "Sentences per decoding batch; default: the "
                     "config's.")
flags.DEFINE_enum("precision", None, ["auto", "float32", "float32_bf16_matmul"], "Precision "
                  "of the search's matrix products (float32_bf16_matmul: bfloat16 operands, "
                  "faster on AMX/AVX512-BF16 CPUs; auto: those where the CPU has them); "
                  "default: the config's decode.precision.")
flags.DEFINE_integer("shortlist", None, "Vocabulary shortlist (translate, evaluate): score only "
                     "the N best translations of each source word and the "
                     "--shortlist_frequent most frequent target words; 0 = the whole "
                     "vocabulary; default: the config's decode.shortlist.")
flags.DEFINE_integer("shortlist_frequent", None, "Most frequent target words always in the "
                     "shortlist; default: the config's decode.shortlist_frequent.")
flags.DEFINE_enum("hard_inference", None, ["expectation", "argmax"], "A hard-attention "
                  "run's context while decoding: expectation (the soft context, the sum of "
                  "the annotations weighted by alpha) or argmax (the annotation alpha weighs "
                  "most); default: the run's model.hard_inference.")
flags.DEFINE_string("export_dir", None, "export: base directory of the exported models, default "
                    "RUN_DIR/export; the model goes to EXPORT_DIR/MODEL_NAME/VERSION. serve: "
                    "an export to serve instead of the run (EXPORT_DIR, EXPORT_DIR/MODEL_NAME "
                    "or one VERSION folder).")
flags.DEFINE_string("export_model_name", None, "Model name (subdirectory, and the name in "
                    "serve's /v1/models/NAME); default nmt, nmt_caption for a captioning run, "
                    "nmt_litert with --format=litert.")

FLAGS = flags.FLAGS
# Errors a user's input can cause: the commands print them as one `error:` line.
USER_ERRORS = (DataError, RunDirError, ConfigError, ValueError, OSError)
# The exit code of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports).
INTERRUPTED = 130


def write_lines(path, lines, command):
  """Writes the lines that the iterable `lines` produces (each computed when it is reached)
  to `path` ('-' = stdout) in order, through write_path.LineOutput; returns the exit code.

  Ctrl-C, or SIGTERM (which the command line turns into it, cli/app.py), stops it with one
  `error:` line saying where the lines written so far are (`<path>.partial`; `path` keeps its
  old content) and exit code 130.
  """
  with write_path.LineOutput(path) as out:
    try:
      for line in lines:
        out.write(line)
      out.commit()
    except BaseException as error:  # pylint: disable=broad-exception-caught
      if not (isinstance(error, KeyboardInterrupt) or write_path.stop_requested()):
        raise
      done, kept = out.stop(), out.kept()
      where = f"in {kept} ({path} is unchanged)" if kept else "on stdout"
      write_path.report_stop(f"error: {command} interrupted; the {done} lines written so far "
                             f"are {where}; rerun the command for the whole output.")
      return INTERRUPTED
  return 0


# The fields of config.decode that a flag of the decoding commands sets: {field: flag}.
DECODE_FLAGS = {"beam_size": "beam_size", "nbest": "nbest", "length_penalty": "length_penalty",
                "coverage_penalty": "coverage_penalty", "batch_size": "decode_batch_size",
                "precision": "precision", "shortlist": "shortlist",
                "shortlist_frequent": "shortlist_frequent"}
# The sections of a run's config.json that the commands other than train read (the pipeline
# and train sections only shape training).
READ_SECTIONS = ("model", "data", "tokenizer", "decode")
# The commands that read the run's config.json, not --config (which train and main use).
RUN_CONFIG_COMMANDS = ("average", "caption", "evaluate", "export", "score", "serve",
                       "translate")


def config_flags_error(command, argv):
  """None, or the one-line error for --config flags that `command` would ignore.

  The commands of RUN_CONFIG_COMMANDS read the run's config.json; a --config, or an override
  --config.SECTION.KEY=VALUE, that gives a section it reads another value than the run's
  would be dropped without a word (an evaluation believed to decode with argmax hard
  attention would decode with the run's setting). Given --config=RECIPE, every field of
  those sections is compared; given overrides alone, the fields they name. The same flags
  the run was trained with pass, so that one set of flags serves train and evaluate. None
  also when the run has no readable config.json: the command itself says what is missing.
  """
  recipe = any(arg == "--config" or arg.startswith("--config=") for arg in argv)
  overridden = {arg[len("--config."):].split("=", 1)[0] for arg in argv
                if arg.startswith("--config.")}  # {"section.key"}
  if command not in RUN_CONFIG_COMMANDS or not (recipe or overridden):
    return None
  # pylint: disable=g-import-not-at-top  (TensorFlow, which the commands import anyway)
  from nmt_tf.experiment import RunDir
  from nmt_tf.experiment.run_dir import INIT_ONLY_MODEL_FIELDS
  run = RunDir(FLAGS.run_dir)
  try:
    saved = run.load_config()
  except RunDirError:
    return None
  try:
    given = experiment_config()
  except ConfigError as error:
    return f"--config: {error}"
  for section in READ_SECTIONS:
    ours, theirs = getattr(given, section), getattr(saved, section)
    for field in dataclasses.fields(ours):
      key, value, kept = field.name, getattr(ours, field.name), getattr(theirs, field.name)
      if not recipe and f"{section}.{key}" not in overridden:
        continue  # the default recipe's value, which the command was not given
      # The vocabulary sizes are the built vocabularies', and fields used only to initialise
      # are kept from the run's creation.
      if value == kept or (section == "model" and key in (
          "src_vocab_size", "tgt_vocab_size") + INIT_ONLY_MODEL_FIELDS):
        continue
      if section == "decode" and key in DECODE_FLAGS:
        fix = f"pass --{DECODE_FLAGS[key]}={value} instead"
      elif (section, key) == ("model", "hard_inference"):
        fix = f"pass --hard_inference={value} instead"
      else:
        fix = ("leave --config out, or train another --run_dir with it (the run's own "
               "config is what it was trained with)")
      return (f"{command} reads the run's config, {run.config_path}, where {section}.{key} is "
              f"{kept!r}, and --config gives {value!r}; {fix}.")
  return None


def experiment_config():
  """The ExperimentConfig of --config (validated; unknown keys are errors)."""
  return ExperimentConfig.from_dict(FLAGS.config)


def decode_config(config):
  """config.decode with the decoding flags that were given applied."""
  overrides = {key: getattr(FLAGS, flag) for key, flag in DECODE_FLAGS.items()
               if getattr(FLAGS, flag) is not None}
  if "beam_size" in overrides and "nbest" not in overrides:
    overrides["nbest"] = min(config.decode.nbest, overrides["beam_size"])
  return dataclasses.replace(config.decode, **overrides)


def decoding_command(run):
  """Decorates the `run(argv)` of a command that decodes and trains nothing (translate,
  evaluate, score, caption, serve): while it runs, TensorFlow's graph optimizer, Grappler, is
  off. Grappler rewrites a tf.function's graph when the function first runs, which took
  0.1-0.4 s of the first traced search (beam 5 about 0.4 s) and gained nothing at run time:
  decoding the 1,014 Multi30k validation sentences ran at the same speed without it, within
  the spread of runs (docs/PERFORMANCE.md). Training, and the decoding of its validations,
  keep it; the setting is restored when `run` returns."""

  @functools.wraps(run)
  def without_grappler(argv):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (imported by the app)
    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer",
                                                                   False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
      return run(argv)
    finally:
      tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})

  return without_grappler
