"""`python run.py export`: writes a SavedModel for TF Serving (docs/EXPORT.md).

  python run.py export --run_dir=runs/quickstart --beam_size=5
  -> runs/quickstart/export/nmt/<next version>/ with signatures serving_default (greedy),
     beam_search (beam and n-best fixed here) and score.
  python run.py export --run_dir=runs/a --checkpoints=runs/a,runs/b   (an ensemble)
  python run.py export --run_dir=runs/quickstart --format=litert --export_quantization=int8
  -> runs/quickstart/export/nmt_litert/<next version>/model.tflite, with its vocabularies
     and a client that runs without TensorFlow (export/litert.py).
"""

import sys

from absl import flags

from nmt_tf.cli import common
from nmt_tf.experiment import RunDir
from nmt_tf.export.caption_export import export_captioner
from nmt_tf.export import DEFAULT_MAX_SOURCE_LENGTH, export_run
from nmt_tf.export.litert import export_litert, QUANTIZATIONS

COMMAND = "export"
FORMATS = ("savedmodel", "litert")

flags.DEFINE_enum("format", "savedmodel", FORMATS, "savedmodel: for TF Serving, text in and "
                  "out. litert: model.tflite (LiteRT builtin ops, ids in and out) with its "
                  "vocabularies and a client that needs no TensorFlow.")
flags.DEFINE_enum("export_quantization", "float32", QUANTIZATIONS, "--format=litert only: "
                  "float32, float16 weights, or int8 weights (dynamic-range quantization).")

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
    if FLAGS.export_quantization != "float32" and FLAGS.format != "litert":
      raise ValueError(f"--export_quantization={FLAGS.export_quantization} applies to "
                       "--format=litert only; add --format=litert, or leave the flag out for "
                       "a SavedModel.")
    run_dir = RunDir(FLAGS.run_dir)
    decode = common.decode_config(run_dir.load_config())
    if decode.shortlist:
      print(f"shortlist: decode.shortlist={decode.shortlist} is not exported; the export "
            "searches the whole vocabulary.", file=sys.stderr)
    common_args = dict(checkpoint=FLAGS.checkpoint, export_dir=FLAGS.export_dir,
                       version=FLAGS.export_version, beam_size=decode.beam_size,
                       nbest=FLAGS.export_nbest, max_source_length=FLAGS.export_max_source_length,
                       decode_config=decode, checkpoints=FLAGS.checkpoints,
                       hard_inference=FLAGS.hard_inference,
                       report=lambda text: print(text, file=sys.stderr))
    if run_dir.load_config().model.encoder == "image":
      if FLAGS.format == "litert":
        raise ValueError("LiteRT export is for translation runs; export a captioning run as "
                         "a SavedModel (--format=savedmodel).")
      common_args.pop("max_source_length")
      path = export_captioner(run_dir, model_name=FLAGS.export_model_name or "nmt_caption",
                              **common_args)
    elif FLAGS.format == "litert":
      path = export_litert(run_dir, model_name=FLAGS.export_model_name or "nmt_litert",
                           quantization=FLAGS.export_quantization, **common_args)
    else:
      path = export_run(run_dir, model_name=FLAGS.export_model_name or "nmt",
                        warmup=FLAGS.export_warmup, **common_args)
  except common.USER_ERRORS as error:  # ExportError is a ValueError
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(path)
  return 0
