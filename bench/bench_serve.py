"""`nmt-tf serve` under load: requests/s and latency at 1, 4 and 16 concurrent clients, over
REST and gRPC; and the latency of a new version taking over under load.

Usage: .venv/bin/python bench/bench_serve.py --run_dir=RUN [--clients 1,4,16]
           [--requests 64] [--signatures serving_default,beam_search] [--sentences FILE]
           [--batch_timeouts 0,2000] [--protocols rest,grpc]
       .venv/bin/python bench/bench_serve.py --run_dir=RUN --swap_export=EXPORT/nmt/1
           [--swap_clients 16] [--swap_seconds 20]
RUN is a trained run (its best checkpoint). The server runs in a process of its own
(`nmt-tf serve --run_dir=RUN --grpc_port=...`, once per --batch_timeouts value) on
127.0.0.1; each client sends one sentence per request, over one HTTP connection or gRPC
channel, one request after another, --requests in all spread over the clients (each client
its own sentences, in file order). Beside it, the same sentences through the signature called
in this process, one at a time (the server's work without HTTP, JSON or batching). The
sentences: --sentences (one per line), else the run's validation sources. Prints one JSON
object: the CPU, then per signature, protocol and client count the requests/s and the median
and 99th-percentile latency in ms.

With --swap_export (a version folder of `nmt-tf export`), the server serves a base path
holding it as version 1 (`--export_dir`, polled every 0.2 s). A copy of it is renamed in as
version 2 with no client sending (an unloaded load, timed until it serves); then
--swap_clients gRPC clients send serving_default requests for --swap_seconds, and half-way
another copy arrives as version 3. Printed: the unloaded load's seconds, the swap's and their
ratio; the p50 and p99 of the steady half, and of the requests answered from the copy's
arrival until version 3 served (the swap), with the slowest of them, its ratio to the steady
p99, and when the five slowest were answered.
"""

import concurrent.futures
import http.client
import json
import os
import sys
import time
import urllib.request

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests import server_fixtures  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.release_fixtures import load_client  # pylint: disable=g-import-not-at-top,wrong-import-position

CLIENT = load_client()  # export/client.py

flags.DEFINE_string("run_dir", None, "A trained run directory.")
flags.DEFINE_list("clients", ["1", "4", "16"], "Concurrent client counts.")
flags.DEFINE_integer("requests", 64, "Requests per signature and client count.")
flags.DEFINE_list("signatures", ["serving_default", "beam_search"], "Signatures to time.")
flags.DEFINE_list("batch_timeouts", ["2000"], "--batch_timeout_micros values of the server, "
                  "each timed in turn.")
flags.DEFINE_string("sentences", None, "Sentences, one per line; default the run's "
                    "validation sources.")
flags.DEFINE_list("protocols", ["rest", "grpc"], "The APIs timed: rest, grpc.")
flags.DEFINE_string("swap_export", None, "A version folder of an export: time a version swap "
                    "under load instead.")
flags.DEFINE_integer("swap_clients", 16, "Concurrent clients during the swap.")
flags.DEFINE_float("swap_seconds", 20, "Seconds of load; the new version arrives half-way.")
FLAGS = flags.FLAGS


def _sentences(count):
  if FLAGS.sentences:
    with open(FLAGS.sentences, encoding="utf-8") as f:
      lines = [line.strip() for line in f if line.strip()]
  else:
    from nmt_tf.experiment import RunDir  # pylint: disable=g-import-not-at-top
    run = RunDir(FLAGS.run_dir)
    config = run.load_config()
    from nmt_tf.data import load_corpus  # pylint: disable=g-import-not-at-top
    lines = list(load_corpus(config.data)["valid"].sources)
  return (lines * (count // max(len(lines), 1) + 1))[:count]


def _client(port, signature, sentences):
  """Latencies (s) of one client sending `sentences` one request each, over one connection."""
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
  latencies = []
  for sentence in sentences:
    body = json.dumps({"signature_name": signature, "instances": [sentence]})
    start = time.perf_counter()
    connection.request("POST", "/v1/models/nmt:predict", body,
                       {"Content-Type": "application/json"})
    answer = connection.getresponse()
    data = answer.read()
    latencies.append(time.perf_counter() - start)
    if answer.status != 200:
      raise RuntimeError(f"HTTP {answer.status}: {data[:200]!r}")
  connection.close()
  return latencies


def _grpc_client(address, signature, sentences):
  """Latencies (s) of one client sending `sentences` one request each, over one channel."""
  import grpc  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.apis import prediction_service_pb2_grpc  # pylint: disable=g-import-not-at-top
  latencies = []
  with grpc.insecure_channel(address) as channel:
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    for sentence in sentences:
      request = CLIENT.predict_request([sentence], "nmt", signature)
      start = time.perf_counter()
      stub.Predict(request, 300)
      latencies.append(time.perf_counter() - start)
  return latencies


def _figures(latencies, seconds):
  ms = np.asarray(latencies) * 1000
  return {"requests_per_s": round(len(ms) / seconds, 2),
          "p50_ms": round(float(np.percentile(ms, 50)), 1),
          "p99_ms": round(float(np.percentile(ms, 99)), 1)}


def _in_process(signature_name, sentences):
  from nmt_tf.server import servable  # pylint: disable=g-import-not-at-top
  served = servable.load_run(FLAGS.run_dir)
  signature = served.versions[1][signature_name]
  signature({k: np.array([b"warm up"], object) for k in signature.inputs})
  latencies = []
  start = time.perf_counter()
  for sentence in sentences:
    begin = time.perf_counter()
    signature({"text": np.array([sentence.encode("utf-8")], object)})
    latencies.append(time.perf_counter() - begin)
  return _figures(latencies, time.perf_counter() - start)


def _time_server(setting, sentences, results, args):
  """Times `nmt-tf serve ARGS` at each client count into
  results[signature]["PROTOCOL, setting"]."""
  grpc_port = server_fixtures.free_port()
  process, url = server_fixtures.serve_process(args + [f"--grpc_port={grpc_port}"])
  port = int(url.rsplit(":", 1)[1])
  senders = {"rest": lambda sig, s: _client(port, sig, s),
             "grpc": lambda sig, s: _grpc_client(f"127.0.0.1:{grpc_port}", sig, s)}
  try:
    for signature in FLAGS.signatures:
      for protocol in FLAGS.protocols:
        send = senders[protocol]
        send(signature, sentences[:4])  # warm-up
        rows = results.setdefault(signature, {}).setdefault(f"{protocol}, {setting}", {})
        for clients in (int(c) for c in FLAGS.clients):
          shares = [sentences[k::clients] for k in range(clients)]
          start = time.perf_counter()
          with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            parts = list(pool.map(lambda s, sig=signature, f=send: f(sig, s), shares))
          seconds = time.perf_counter() - start
          rows[f"{clients} clients"] = _figures([x for p in parts for x in p], seconds)
  finally:
    process.terminate()
    process.wait(30)


def _arrive(base, version, url):
  """Renames a copy of --swap_export into `base` as `version`; (arrived, served) times once
  the server reports it AVAILABLE."""
  import shutil  # pylint: disable=g-import-not-at-top
  staged = os.path.join(base, f".{version}.tmp")
  shutil.copytree(FLAGS.swap_export, staged)
  arrived = time.perf_counter()
  os.rename(staged, os.path.join(base, str(version)))
  while True:  # until the version answers unversioned requests
    with urllib.request.urlopen(url + "/v1/models/nmt", timeout=300) as answer:
      status = json.loads(answer.read())["model_version_status"]
    if any(v["version"] == str(version) and v["state"] == "AVAILABLE" for v in status):
      return arrived, time.perf_counter()
    time.sleep(0.05)


def _swap(sentences):
  """The time of an unloaded load, then the latencies of steady load and of a version swap
  under it (module docstring)."""
  import shutil  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  base = os.path.join(tempfile.mkdtemp(), "nmt")
  shutil.copytree(FLAGS.swap_export, os.path.join(base, "1"))
  grpc_port = server_fixtures.free_port()
  process, url = server_fixtures.serve_process(
      [f"--export_dir={base}", f"--grpc_port={grpc_port}",
       "--file_system_poll_wait_seconds=0.2"])
  address = f"127.0.0.1:{grpc_port}"
  _grpc_client(address, "serving_default", sentences[:4])  # warm-up
  stop, answered = threading.Event(), []  # (time answered, latency)

  def client(k):
    share = sentences[k::FLAGS.swap_clients]
    i = 0
    while not stop.is_set():
      latency = _grpc_client(address, "serving_default", [share[i % len(share)]])[0]
      answered.append((time.perf_counter(), latency))
      i += 1
  threads = [threading.Thread(target=client, args=(k,)) for k in range(FLAGS.swap_clients)]
  try:
    unloaded = _arrive(base, 2, url)  # no client: the time of a load alone
    start = time.perf_counter()
    for thread in threads:
      thread.start()
    time.sleep(FLAGS.swap_seconds / 2)
    arrived, swapped = _arrive(base, 3, url)
    time.sleep(max(0.0, start + FLAGS.swap_seconds - time.perf_counter()))
  finally:
    stop.set()
    for thread in threads:
      thread.join(300)
    process.terminate()
    process.wait(30)
    shutil.rmtree(os.path.dirname(base), ignore_errors=True)
  steady = [lat for at, lat in answered if start + 2 < at < arrived]
  swap = [(at, lat) for at, lat in answered if arrived <= at <= swapped + 0.5]
  during = [lat for _, lat in swap]
  p99 = float(np.percentile(steady, 99))
  return {"clients": FLAGS.swap_clients,
          "unloaded_load_seconds": round(unloaded[1] - unloaded[0], 2),
          "swap_seconds": round(swapped - arrived, 2),
          "swap_over_unloaded_load": round((swapped - arrived) / (unloaded[1] - unloaded[0]),
                                           2),
          "steady": _figures(steady, arrived - start - 2),
          "during_swap": _figures(during, swapped + 0.5 - arrived),
          "slowest_during_swap_ms": round(max(during) * 1000, 1),
          # When the five slowest were answered, in s from the new version's arrival.
          "slowest_answered_at_s": [round(at - arrived, 2) for at, _ in
                                    sorted(swap, key=lambda pair: -pair[1])[:5]],
          "slowest_over_steady_p99": round(max(during) / p99, 2)}


def main(argv):
  del argv
  if not FLAGS.run_dir:
    raise app.UsageError("--run_dir is required")
  sentences = _sentences(FLAGS.requests)
  report = {"machine": common.device_info(), "run_dir": FLAGS.run_dir,
            "requests": FLAGS.requests, "results": {}}
  if FLAGS.swap_export:
    report["swap"] = _swap(sentences)
    common.print_json(report)
    return
  for timeout in FLAGS.batch_timeouts:
    _time_server(f"batch_timeout_micros={timeout}", sentences, report["results"],
                 [f"--run_dir={FLAGS.run_dir}", f"--batch_timeout_micros={timeout}"])
  for signature in FLAGS.signatures:
    report["results"][signature]["in process, 1 at a time"] = _in_process(signature, sentences)
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
