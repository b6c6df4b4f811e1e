"""`nmt-tf serve`: a local model server with TF Serving's REST API and an attention page.

  nmt-tf serve --run_dir=runs/quickstart           the run's best checkpoint, in this process
  nmt-tf serve --export_dir=runs/quickstart/export the versions `nmt-tf export` wrote
  nmt-tf serve --export_dir=... --grpc_port=8500   TF Serving's gRPC API as well
  nmt-tf serve --model_config_file=models.config   several models, as TF Serving's
  curl -d '{"instances": ["the boy helps the king"]}' localhost:8501/v1/models/nmt:predict

The model is loaded once; concurrent requests are grouped into batches (--max_batch_size,
--batch_timeout_micros), as TF Serving's batching does. The page at http://HOST:PORT/ shows
the translations of a typed sentence (an uploaded image for a captioning run) and the
attention of each. The API and its errors: docs/SERVE.md.
"""

import socket
import sys

from absl import flags

from nmt_tf.cli import common

COMMAND = "serve"

flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface).")
flags.DEFINE_integer("port", 8501, "Port of the REST API and the page (TF Serving's REST port; "
                     "--rest_api_port names it too).")
flags.DEFINE_alias("rest_api_port", "port")
flags.DEFINE_integer("grpc_port", 0, "Port of TF Serving's gRPC API (PredictionService, "
                     "ModelService; TF Serving's --port, 8500); 0: no gRPC.")
flags.DEFINE_list("version_labels", [], "Labels naming versions, as TF Serving's "
                  "version_labels: stable=1,canary=2 (with --export_dir).")
flags.DEFINE_string("model_config_file", None, "TF Serving's ModelServerConfig in text format: "
                    "several models, each a base_path of versions with its version policy and "
                    "labels (instead of --run_dir or --export_dir).")
flags.DEFINE_float("file_system_poll_wait_seconds", 1.0, "How often the base paths of exports "
                   "are looked at for new and removed versions (0: never).")
flags.DEFINE_integer("max_batch_size", 64, "Most rows of one request, and of one batch of "
                     "grouped requests.")
flags.DEFINE_integer("batch_timeout_micros", 2000, "How long a batch waits for more requests "
                     "after its first (0: no grouping).")
flags.DEFINE_integer("max_text_chars", 2000, "Most characters of one input text.")
flags.DEFINE_integer("max_body_bytes", 8 << 20, "Most bytes of one request body.")

FLAGS = flags.FLAGS


def _labels(entries, versions):
  labels = {}
  for entry in entries:
    label, _, version = entry.partition("=")
    if not label or not version.isdigit() or int(version) not in versions:
      raise ValueError(f"--version_labels entry {entry!r}: expected LABEL=VERSION with one of "
                       f"the served versions {sorted(versions)}.")
    labels[label] = int(version)
  return labels


def load_servables():
  """The Servables of the flags: those of --model_config_file, else the one of --export_dir,
  else --checkpoint of --run_dir."""
  # pylint: disable=g-import-not-at-top
  from nmt_tf.server import model_config, servable
  if FLAGS.model_config_file:
    given = [f"--{name}" for name in ("export_dir", "run_dir", "version_labels",
                                      "export_model_name", "checkpoint")
             if FLAGS[name].present]
    if given:
      raise ValueError(f"--model_config_file names the models; drop {', '.join(given)} "
                       "(labels go in the file's version_labels).")
    served = [servable.load_entry(entry, _report)
              for entry in model_config.read(FLAGS.model_config_file)]
    for one in served:
      servable.warm_up(one)
    return served
  return [load_servable()]


def load_servable():
  """The Servable of the flags: --export_dir, else --checkpoint of --run_dir."""
  from nmt_tf.server import servable  # pylint: disable=g-import-not-at-top
  if FLAGS.export_dir:
    if FLAGS.hard_inference:
      raise ValueError("--hard_inference applies to a run (--run_dir); an export decodes as it "
                       "was exported: export the run with --hard_inference and serve that.")
    served = servable.load_export(FLAGS.export_dir, FLAGS.export_model_name)
  else:
    decode = common.decode_config(_run_config())
    served = servable.load_run(FLAGS.run_dir, FLAGS.checkpoint, FLAGS.export_model_name,
                               FLAGS.beam_size, FLAGS.nbest, decode,
                               hard_inference=FLAGS.hard_inference)
  served.labels = _labels(FLAGS.version_labels, served.versions)
  servable.warm_up(served)
  return served


def _run_config():
  from nmt_tf.experiment import RunDir  # pylint: disable=g-import-not-at-top
  return RunDir(FLAGS.run_dir).load_config()


@common.decoding_command
def run(argv):
  if argv:
    print(f"error: serve takes no positional arguments; received {argv}.", file=sys.stderr)
    return 2
  try:
    import starlette, uvicorn  # pylint: disable=g-import-not-at-top,multiple-imports,unused-import
  except ImportError:
    print("error: nmt-tf serve needs Starlette and uvicorn; install them with "
          "`pip install 'nmt-tf[serve]'`.", file=sys.stderr)
    return 2
  for name in ("max_batch_size", "max_text_chars", "max_body_bytes"):
    if FLAGS[name].value < 1:
      print(f"error: --{name}={FLAGS[name].value}; expected a positive integer.",
            file=sys.stderr)
      return 2
  for name, lowest, zero in (("port", 1, ""), ("grpc_port", 0, " (0: no gRPC)")):
    if not lowest <= FLAGS[name].value <= 65535:
      print(f"error: --{name}={FLAGS[name].value}; expected a port from 1 to 65535{zero}.",
            file=sys.stderr)
      return 2
  if FLAGS.grpc_port and FLAGS.grpc_port == FLAGS.port:
    print(f"error: --grpc_port and --port are both {FLAGS.port}; give the gRPC API and the REST "
          "API a port each (TF Serving: 8500 and 8501).", file=sys.stderr)
    return 2
  if FLAGS.file_system_poll_wait_seconds < 0:
    print(f"error: --file_system_poll_wait_seconds={FLAGS.file_system_poll_wait_seconds}; "
          "expected a number of seconds, 0 for never.", file=sys.stderr)
    return 2
  try:
    _check_port(FLAGS.host, FLAGS.port, "--port")
    if FLAGS.grpc_port:
      _check_port(FLAGS.host, FLAGS.grpc_port, "--grpc_port")
    served = load_servables()
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  from nmt_tf.server.app import create_app, Limits  # pylint: disable=g-import-not-at-top
  limits = Limits(FLAGS.max_batch_size, FLAGS.max_text_chars, FLAGS.max_body_bytes,
                  FLAGS.batch_timeout_micros)
  grpc_address = _address(FLAGS.host, FLAGS.grpc_port) if FLAGS.grpc_port else None
  app = create_app(served, limits, grpc_address, FLAGS.file_system_poll_wait_seconds,
                   report=_report)
  for one in (one for one in served if one.versions):  # the others were reported waiting
    versions = ", ".join(f"{v}: {', '.join(sorted(s))}" for v, s in sorted(one.versions.items()))
    print(f"serving {one.name} (version {versions})", file=sys.stderr)
  grpc_text = f", gRPC: {grpc_address}" if grpc_address else ""
  print(f"at http://{FLAGS.host}:{FLAGS.port}/ (REST: /v1/models/{served[0].name}:predict"
        f"{grpc_text}); Ctrl-C stops", file=sys.stderr, flush=True)
  uvicorn.run(app, host=FLAGS.host, port=FLAGS.port, log_level="warning",
              timeout_graceful_shutdown=5)
  return 0


def _report(line):
  """A line on stderr: a version loaded, removed or failing while serving."""
  print(line, file=sys.stderr, flush=True)


def _address(host, port):
  return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_port(host, port, flag):
  """OSError naming the fix unless `host`:`port` can be listened on (checked before the model
  loads, which takes seconds)."""
  family = socket.AF_INET6 if ":" in host else socket.AF_INET
  with socket.socket(family, socket.SOCK_STREAM) as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind((host, port))
    except OSError as error:
      raise OSError(f"cannot listen on {host}:{port} ({error.strerror or error}); pass another "
                    f"{flag} or --host.") from None
