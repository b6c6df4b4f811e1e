"""`python run.py train`: train (or resume) the run of --run_dir with the --config experiment.

  python run.py train --config=generated:cgru --run_dir=runs/quickstart \
      --config.train.steps=3000 --config.train.learning_rate=1e-3

Running the same command again after a stop or a crash resumes from the last checkpoint.
Errors the user can fix (config, data, a run directory in use, missing or corrupt training
state, a changed corpus) are one `error:` line with exit code 2; a training failure (a
non-finite loss) exits with code 1. Nothing in the run directory is deleted or replaced by a
worse model (docs/TRAINING.md, "Interruptions, corruption and other processes").
"""

import json
import sys

from absl import flags

from nmt_tf.cli import common
from nmt_tf.data import DataError
from nmt_tf.experiment import RunDirError
from nmt_tf.models.config import ConfigError

COMMAND = "train"

flags.DEFINE_bool("restart_from_scratch", False, "Train from step 0 when no checkpoint of "
                  "--run_dir is usable (after the error that says so); best/ is kept and "
                  "replaced only by a model with a higher validation BLEU.")
flags.DEFINE_bool("accept_changed_corpus", False, "Go on although the corpus files changed "
                  "since the run began (the run keeps its vocabulary); records the new "
                  "fingerprint.")
flags.DEFINE_string("init_from", None, "Fine-tune: start the new --run_dir from this run's "
                    "weights (RUN: its best/; RUN:last; or a checkpoint prefix), keeping its "
                    "model and vocabularies; the optimizer starts anew.")
flags.DEFINE_enum("update_vocab", None, ["merge", "replace"], "With --init_from: make the "
                  "vocabularies from this run's corpus with the parent's tokenizer settings, "
                  "and keep the parent's rows of the tokens both hold. merge: the parent's "
                  "tokens and the new ones; replace: the new ones only.")
flags.DEFINE_integer("train_logical_cpus", 0, "Split the CPU into this many logical devices "
                     "(with --config.train.strategy=mirrored on a machine without GPUs).")

FLAGS = flags.FLAGS


def _error(message, code):
  print(f"error: {message}", file=sys.stderr)
  return code


def run(argv):
  """Trains; prints the summary as JSON. Exit 2 for what the user can fix, 1 for a failed
  training."""
  if argv:
    return _error(f"Received unexpected arguments {argv}; `train` takes only --flags.", 2)
  if FLAGS.update_vocab and not FLAGS.init_from:
    return _error("--update_vocab updates the vocabularies of a parent run; give it with "
                  "--init_from=RUN.", 2)
  try:
    config = common.experiment_config()
  except (ConfigError, DataError, ValueError, TypeError) as error:
    return _error(str(error), 2)
  # Imported here so that `run.py help` stays fast and config errors come before TF starts.
  from nmt_tf.training import distribution, train, TrainingError  # pylint: disable=g-import-not-at-top
  from nmt_tf.training.errors import disk_full, NonFiniteLossError  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if FLAGS.train_logical_cpus > 1:
    distribution.use_logical_cpus(FLAGS.train_logical_cpus)
  try:
    summary = train(config, FLAGS.run_dir, restart_from_scratch=FLAGS.restart_from_scratch,
                    accept_changed_corpus=FLAGS.accept_changed_corpus,
                    init_from=FLAGS.init_from, update_vocab=FLAGS.update_vocab)
  except NonFiniteLossError as error:
    return _error(str(error), 1)
  except (RunDirError, ConfigError, DataError, TrainingError) as error:
    return _error(str(error), 2)
  except (OSError, tf.errors.OpError) as error:
    if not disk_full(error):
      raise
    return _error(f"No space left on device ({' '.join(str(error).split())[:200]}); free disk "
                  "space and rerun the same command: training resumes from the last "
                  "checkpoint.", 2)
  except KeyboardInterrupt:
    return _error("Interrupted; rerun the same command to resume from the last checkpoint.", 130)
  print(json.dumps(summary, indent=2, sort_keys=True))
  return 0
