"""`python run.py export`: writes a SavedModel for TF Serving (docs/EXPORT.md).

  python run.py export --run_dir=runs/quickstart --beam_size=5
  -> runs/quickstart/export/nmt/<next version>/ with signatures serving_default (greedy),
     beam_search (beam and n-best fixed here) and score.
  python run.py export --run_dir=runs/a --checkpoints=runs/a,runs/b   (an ensemble)
"""

import sys

from absl import flags

from nmt_tf.cli import common
from nmt_tf.experiment import RunDir
from nmt_tf.export import DEFAULT_MAX_SOURCE_LENGTH, export_run

COMMAND = "export"
HELP = "Export a checkpoint as a TF Serving SavedModel (greedy, beam_search, score)."

flags.DEFINE_string("export_dir", None, "Base directory of the exported models; default "
                    "RUN_DIR/export. The model goes to EXPORT_DIR/MODEL_NAME/VERSION.")
flags.DEFINE_string("export_model_name", "nmt", "TF Serving model name (subdirectory).")
flags.DEFINE_integer("export_version", None, "Version number; default: the next free one.")
flags.DEFINE_integer("export_nbest", None, "Hypotheses returned by the beam_search signature; "
                     "default: the beam size.")
flags.DEFINE_integer("export_max_source_length", DEFAULT_MAX_SOURCE_LENGTH,
                     "Longer inputs are cut to this many tokens; the output `truncated` says so.")
flags.DEFINE_boolean("export_warmup", True, "Write assets.extra/tf_serving_warmup_requests, "
                     "which TF Serving replays before the version serves.")

FLAGS = flags.FLAGS


def run(argv):
  """Exports --checkpoint of --run_dir; prints the version directory."""
  if argv:
    print(f"error: received unexpected arguments {argv}; `run.py export` takes only flags.",
          file=sys.stderr)
    return 2
  try:
    run_dir = RunDir(FLAGS.run_dir)
    decode = common.decode_config(run_dir.load_config())
    path = export_run(run_dir, checkpoint=FLAGS.checkpoint, export_dir=FLAGS.export_dir,
                      model_name=FLAGS.export_model_name, version=FLAGS.export_version,
                      beam_size=decode.beam_size, nbest=FLAGS.export_nbest,
                      max_source_length=FLAGS.export_max_source_length, decode_config=decode,
                      warmup=FLAGS.export_warmup, checkpoints=FLAGS.checkpoints,
                      report=lambda text: print(text, file=sys.stderr))
  except common.USER_ERRORS as error:  # ExportError is a ValueError
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(path)
  return 0
