"""A model server on 127.0.0.1 for the tests: uvicorn in a thread of the test process, or
`nmt-tf serve` in a process of its own; JSON requests to it over real sockets; and a tiny run
exported twice to serve."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from unittest import mock

import uvicorn

from nmt_tf.experiment import RunDir
from nmt_tf.export import export_run
from nmt_tf.server.app import create_app
from tests.run_fixtures import make_tiny_run
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export_twice(path):
  """(RunDir, corpus) of an untrained tiny run at `path` exported as version 1 (beam 3,
  3-best) and version 2 (beam 2, 2-best), without warm-up records."""
  run, _, corpus = make_tiny_run(path)
  restored = run.load_model("best")
  with mock.patch.object(RunDir, "load_model", return_value=restored):
    export_run(run.path, warmup=False)
    export_run(run.path, warmup=False, beam_size=2, nbest=2)
  return run, corpus


def free_port():
  with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    return probe.getsockname()[1]


class ThreadServer:
  """uvicorn serving create_app(servable, limits) on 127.0.0.1 in a daemon thread; with
  `grpc`, TF Serving's gRPC API too, at `grpc_address`; with `poll_seconds`, new versions."""

  def __init__(self, servable, limits=None, grpc=False, poll_seconds=None):
    self.port = free_port()
    self.grpc_address = f"127.0.0.1:{free_port()}" if grpc else None
    self.reports = []  # the lines of reload.Watcher
    app = create_app(servable, limits, self.grpc_address, poll_seconds, self.reports.append)
    config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
    self.server = uvicorn.Server(config)
    self.thread = threading.Thread(target=self.server.run, daemon=True)
    self.thread.start()
    deadline = time.time() + SAFETY_NET
    while not self.server.started:
      if time.time() > deadline or not self.thread.is_alive():
        raise RuntimeError("the test server did not start")
      time.sleep(0.02)
    self.url = f"http://127.0.0.1:{self.port}"

  def stop(self):
    self.server.should_exit = True
    self.thread.join(10)


def serve_process(args, env=None, timeout=SAFETY_NET, python=None, cwd=ROOT):
  """(Popen, url) of `nmt-tf serve ARGS --port=FREE` (run by `python`, default this one), once
  it answers; RuntimeError with its stderr if it exits first."""
  port = free_port()
  process = subprocess.Popen(
      [python or sys.executable, "-m", "nmt_tf", "serve", f"--port={port}"] + list(args),
      cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
      env=env if env is not None else os.environ)
  url = f"http://127.0.0.1:{port}"
  deadline = time.time() + timeout
  while time.time() < deadline:
    if process.poll() is not None:
      raise RuntimeError(f"nmt-tf serve exited with {process.returncode}: "
                         f"{process.stderr.read()}")
    try:
      with urllib.request.urlopen(url + "/", timeout=2):
        return process, url
    except (urllib.error.URLError, ConnectionError, socket.timeout):
      time.sleep(0.3)
  process.kill()
  raise RuntimeError("nmt-tf serve did not answer in time")


def request(url, body=None, method=None, raw=None, headers=None, timeout=SAFETY_NET):
  """(HTTP status, parsed JSON answer) of a request: `body` sent as JSON, or `raw` bytes."""
  data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
  req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None
                                                                 else "GET"),
                               headers={"Content-Type": "application/json", **(headers or {})})
  try:
    with urllib.request.urlopen(req, timeout=timeout) as answer:
      return answer.status, json.loads(answer.read())
  except urllib.error.HTTPError as error:
    return error.code, json.loads(error.read())
