"""`nmt-tf serve` under load: requests/s and latency at 1, 4 and 16 concurrent clients.

Usage: .venv/bin/python bench/bench_serve.py --run_dir=RUN [--clients 1,4,16]
           [--requests 64] [--signatures serving_default,beam_search] [--sentences FILE]
           [--batch_timeouts 0,2000]
RUN is a trained run (its best checkpoint). The server runs in a process of its own
(`nmt-tf serve --run_dir=RUN`, once per --batch_timeouts value) on 127.0.0.1; each client sends one
sentence per request, over one HTTP connection, one request after another, --requests in
all spread over the clients (each client its own sentences, in file order). Beside it, the
same sentences through the signature called in this process, one at a time (the server's
work without HTTP, JSON or batching). The sentences: --sentences (one per line), else the
run's validation sources. Prints one JSON object: the CPU, then per signature and client
count the requests/s and the median and 99th-percentile latency in ms.
"""

import concurrent.futures
import http.client
import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests import server_fixtures  # pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string("run_dir", None, "A trained run directory.")
flags.DEFINE_list("clients", ["1", "4", "16"], "Concurrent client counts.")
flags.DEFINE_integer("requests", 64, "Requests per signature and client count.")
flags.DEFINE_list("signatures", ["serving_default", "beam_search"], "Signatures to time.")
flags.DEFINE_list("batch_timeouts", ["2000"], "--batch_timeout_micros values of the server, "
                  "each timed in turn.")
flags.DEFINE_string("sentences", None, "Sentences, one per line; default the run's "
                    "validation sources.")
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
  """Times `nmt-tf serve ARGS` at each client count into results[signature][setting]."""
  process, url = server_fixtures.serve_process(args)
  port = int(url.rsplit(":", 1)[1])
  try:
    for signature in FLAGS.signatures:
      _client(port, signature, sentences[:4])  # warm-up
      rows = results.setdefault(signature, {}).setdefault(setting, {})
      for clients in (int(c) for c in FLAGS.clients):
        shares = [sentences[k::clients] for k in range(clients)]
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
          parts = list(pool.map(lambda s, sig=signature: _client(port, sig, s), shares))
        seconds = time.perf_counter() - start
        rows[f"{clients} clients"] = _figures([x for p in parts for x in p], seconds)
  finally:
    process.terminate()
    process.wait(30)


def main(argv):
  del argv
  if not FLAGS.run_dir:
    raise app.UsageError("--run_dir is required")
  sentences = _sentences(FLAGS.requests)
  report = {"machine": common.device_info(), "run_dir": FLAGS.run_dir,
            "requests": FLAGS.requests, "results": {}}
  for timeout in FLAGS.batch_timeouts:
    _time_server(f"batch_timeout_micros={timeout}", sentences, report["results"],
                 [f"--run_dir={FLAGS.run_dir}", f"--batch_timeout_micros={timeout}"])
  for signature in FLAGS.signatures:
    report["results"][signature]["in process, 1 at a time"] = _in_process(signature, sentences)
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
