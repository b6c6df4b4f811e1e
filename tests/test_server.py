"""`nmt-tf serve`: TF Serving's REST and gRPC APIs against the export's signatures called
directly, their errors, batching across concurrent clients, export/client.py against both, the
command, and the attention page in headless Chromium."""

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import json_format
from prometheus_client.parser import text_string_to_metric_families
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from nmt_tf.server import batching, rest, servable
from nmt_tf.server.app import Limits
from nmt_tf.server.errors import RequestError
from tests import server_fixtures
from tests import shared_fixtures
from tests.release_fixtures import load_client
from tests.run_fixtures import make_tiny_run
from tests.server_fixtures import request, ROOT
from tests.waits import SAFETY_NET

CLIENT = load_client()  # export/client.py


class RestProtocolTest(tf.test.TestCase):
  """rest.py and servable.rows_of, without a model."""

  def test_row_and_columnar_requests(self):
    specs = {"text": "string"}
    for body in ({"instances": ["a b", "c"]}, {"instances": [{"text": "a b"}, {"text": "c"}]},
                 {"inputs": {"text": ["a b", "c"]}}, {"inputs": ["a b", "c"]},
                 {"instances": [{"b64": "YSBi"}, "c"]}):
      inputs, row = rest.parse_predict(body, specs)
      self.assertEqual(list(inputs["text"]), [b"a b", b"c"])
      self.assertEqual(row, "instances" in body)
    inputs, _ = rest.parse_predict({"inputs": {"source": ["x"], "target": ["y"]}},
                                   {"source": "string", "target": "string"})
    self.assertEqual((list(inputs["source"]), list(inputs["target"])), ([b"x"], [b"y"]))

  def test_refused_requests(self):
    specs = {"text": "string"}
    two = {"source": "string", "target": "string"}
    for body, specs_, words in (
        ({}, specs, "Missing 'instances' or 'inputs'"),
        ({"instances": [], "inputs": []}, specs, "both"),
        ({"instances": "a"}, specs, "must be a list"),
        ({"instances": [3]}, specs, "expected a string"),
        ({"instances": [{"txt": "a"}]}, specs, "lacks the input 'text'"),
        ({"instances": [{"b64": "%%%"}]}, specs, "not valid base64"),
        ({"instances": ["\ud800"]}, specs, "lone surrogate"),
        ({"inputs": {"source": ["a"], "target": []}}, two, "different batch sizes"),
        ({"instances": ["a"]}, two, "is not an object"),
    ):
      with self.assertRaisesRegex(RequestError, words):
        rest.parse_predict(body, specs_)
    deep = b'{"instances": ' + b"[" * 100000 + b'"a"' + b"]" * 100000 + b"}"
    for body, words in ((b"", "empty"), (b"{", "JSON Parse error"), (b"[1]", "JSON list"),
                        (b'{"instances": ["\xff"]}', "not valid UTF-8"),
                        (deep, "nests arrays or objects too deeply")):
      with self.assertRaisesRegex(RequestError, words):
        rest.parse_json(body)

  def test_answers(self):
    outputs = {"translation": np.array([b"x", b"y"], object), "log_prob": np.float32([-1, -2])}
    self.assertEqual(rest.predict_answer(outputs, True), {"predictions": [
        {"log_prob": -1.0, "translation": "x"}, {"log_prob": -2.0, "translation": "y"}]})
    self.assertEqual(rest.predict_answer(outputs, False),
                     {"outputs": {"log_prob": [-1.0, -2.0], "translation": ["x", "y"]}})
    self.assertEqual(rest.predict_answer({"t": outputs["translation"]}, True),
                     {"predictions": ["x", "y"]})
    self.assertEqual(rest.dumps({"x": float("-inf")}), '{"x": -Infinity}')

  def test_rows_of_cuts_to_the_rows_own_longest(self):
    outputs = {"source_length": np.int32([2, 4]), "target_length": np.int32([[1, 3], [2, 0]]),
               "source_tokens": np.zeros([2, 4], object),
               "target_tokens": np.zeros([2, 2, 3], object),
               "alignment": np.ones([2, 2, 3, 4], np.float32)}
    first = servable.rows_of(outputs, 0, 1)
    self.assertEqual(first["source_tokens"].shape, (1, 2))
    self.assertEqual(first["target_tokens"].shape, (1, 2, 3))
    self.assertEqual(first["alignment"].shape, (1, 2, 3, 2))
    second = servable.rows_of(outputs, 1, 2)
    self.assertEqual(second["alignment"].shape, (1, 2, 2, 4))


def _close(test, got, want, where):
  """Equal strings and integers, float arrays within 1e-5 (a batch of other sizes may round
  its products otherwise)."""
  test.assertEqual(sorted(got), sorted(want), where)
  for key in want:
    a, b = np.asarray(got[key]), np.asarray(want[key])
    if a.dtype.kind == "f" or b.dtype.kind == "f":
      test.assertAllClose(a.astype(float), b.astype(float), atol=1e-5, msg=f"{where} {key}")
    else:
      test.assertEqual(a.tolist(), b.tolist(), f"{where} {key}")


class BatcherTest(tf.test.TestCase):
  """batching.Batcher: requests for one signature that arrive together run as one call of it,
  and each gets its own rows back; when the joint call fails, each runs alone and only the
  faulty one fails. The signature here is numpy (y = 10 x), so the rows show who got what."""

  def serve(self, requests):
    calls = []

    def signature(inputs):
      calls.append(inputs["x"].tolist())
      if (inputs["x"] < 0).any():
        raise ValueError("negative")
      return {"y": inputs["x"] * 10}

    async def ask():
      batcher = batching.Batcher(max_rows=16, timeout=0.5)
      return await asyncio.gather(
          *[batcher.run("v1/greedy", signature, {"x": np.array(x)}) for x in requests],
          return_exceptions=True)
    return asyncio.run(ask()), calls

  def test_one_call_each_request_its_rows(self):
    answers, calls = self.serve([[1], [2, 3, 4], [5, 6]])
    self.assertEqual(calls, [[1, 2, 3, 4, 5, 6]])
    self.assertEqual([a["y"].tolist() for a in answers], [[10], [20, 30, 40], [50, 60]])

  def test_a_failing_request_fails_alone(self):
    answers, calls = self.serve([[1, 2], [-1], [3]])
    self.assertEqual(calls, [[1, 2, -1, 3], [1, 2], [-1], [3]])
    self.assertEqual(answers[0]["y"].tolist(), [10, 20])
    self.assertIsInstance(answers[1], ValueError)
    self.assertEqual(answers[2]["y"].tolist(), [30])


@pytest.mark.slow
class ServerApiTest(tf.test.TestCase):
  """One tiny run exported twice (versions 1 and 2, labelled; the session's shared fixture),
  served by uvicorn in a thread of this process over 127.0.0.1, with the gRPC API beside
  REST."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    export_dir, sources = shared_fixtures.tiny_export_twice()
    cls.path = os.path.join(export_dir, "nmt", "1")
    cls.loaded = tf.saved_model.load(cls.path)
    served = servable.load_export(export_dir)
    served.labels = {"stable": 1, "canary": 2}
    cls.limits = Limits(max_batch_size=16, max_text_chars=300, max_body_bytes=200_000)
    cls.server = server_fixtures.ThreadServer(served, cls.limits, grpc=True)
    cls.url = cls.server.url + "/v1/models/nmt"
    cls.channel = grpc.insecure_channel(cls.server.grpc_address)
    cls.stub = prediction_service_pb2_grpc.PredictionServiceStub(cls.channel)
    cls.sentences = sources[:5] + ["", "ein unbekanntes Wort ."]

  @classmethod
  def tearDownClass(cls):
    cls.channel.close()
    cls.server.stop()
    super().tearDownClass()

  def direct(self, signature, **inputs):
    outputs = self.loaded.signatures[signature](
        **{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    return {k: rest.to_json_value(v.numpy()) for k, v in outputs.items()}

  def test_predict_equals_the_signatures(self):
    for signature in ("serving_default", "beam_search"):
      want = self.direct(signature, text=self.sentences)
      status, columnar = request(self.url + "/versions/1:predict", {
          "signature_name": signature, "inputs": {"text": self.sentences}})
      self.assertEqual(status, 200, columnar)
      _close(self, columnar["outputs"], want, signature)
      status, rows = request(self.url + "/labels/stable:predict", {
          "signature_name": signature, "instances": [{"text": s} for s in self.sentences]})
      self.assertEqual(status, 200, rows)
      self.assertLen(rows["predictions"], len(self.sentences))
      for i, row in enumerate(rows["predictions"]):
        _close(self, row, {k: v[i] for k, v in want.items()}, f"{signature} row {i}")
    targets = ["the boy", "a", "", "b c", "d", "e", "f"]
    status, scored = request(self.url + "/versions/1:predict", {
        "signature_name": "score", "inputs": {"source": self.sentences, "target": targets}})
    self.assertEqual(status, 200, scored)
    _close(self, scored["outputs"], self.direct("score", source=self.sentences,
                                                target=targets), "score")

  def test_versions_and_labels(self):
    status, answer = request(self.url + ":predict", {
        "signature_name": "beam_search", "instances": ["a b"]})
    self.assertEqual((status, len(answer["predictions"][0]["translation"])), (200, 2))
    status, answer = request(self.url + "/labels/stable:predict", {
        "signature_name": "beam_search", "instances": ["a b"]})
    self.assertEqual((status, len(answer["predictions"][0]["translation"])), (200, 3))

  def test_status_and_metadata(self):
    def available(*versions):
      return {"model_version_status": [{"version": str(v), "state": "AVAILABLE", "status": {
          "error_code": "OK", "error_message": ""}} for v in versions]}
    self.assertEqual(request(self.url), (200, available(1, 2)))
    self.assertEqual(request(self.url + "/versions/2"), (200, available(2)))
    status, meta = request(self.url + "/versions/1/metadata")
    self.assertEqual(status, 200)
    self.assertEqual(meta["model_spec"], {"name": "nmt", "signature_name": "", "version": "1"})
    defs = meta["metadata"]["signature_def"]["signature_def"]
    self.assertEqual(sorted(defs), ["beam_search", "beam_search_constrained",
                                    "beam_search_prefix", "prefix", "score", "serving_default"])
    self.assertEqual(defs["serving_default"]["inputs"]["text"]["dtype"], "DT_STRING")
    self.assertIn("alignment", defs["serving_default"]["outputs"])

  def test_unknown_names_are_404(self):
    for path, body, words in (
        ("/v1/models/other", None, "Servable not found"),
        ("/v1/models/nmt/versions/7:predict", {"instances": ["a"]}, "Specific"),
        ("/v1/models/nmt/labels/beta:predict", {"instances": ["a"]}, "label"),
        ("/v1/models/nmt:predict", {"signature_name": "beam", "instances": ["a"]},
         "not found in signature def"),
        ("/nowhere", None, "Not found")):
      status, answer = request(self.server.url + path, body)
      self.assertEqual(status, 404, path)
      self.assertIn(words, answer["error"])

  def test_hostile_requests_get_their_4xx_and_the_server_goes_on(self):
    url = self.url + ":predict"
    for raw, status_words in (
        (b"", (400, "empty")),
        (b'{"instances": ["\xff\xfe"]}', (400, "not valid UTF-8")),
        (b"{\"instances\": [", (400, "JSON Parse error")),
        (json.dumps({"signature_name": "score", "instances": ["a"]}).encode(),
         (400, "not an object")),
        (json.dumps({"signature_name": "serving_default"}).encode(), (400, "Missing")),
        (json.dumps({"instances": ["x" * 10_000]}).encode(), (400, "--max_text_chars")),
        (json.dumps({"instances": ["a"] * 17}).encode(), (400, "--max_batch_size")),
        (b'{"instances": ' + b"[" * 1000 + b'"a"' + b"]" * 1000 + b"}",
         (400, "nests arrays or objects too deeply")),
        (b"{" + b" " * 300_000 + b"}", (413, "--max_body_bytes")),
    ):
      status, answer = request(url, raw=raw)
      self.assertEqual(status, status_words[0], (raw[:40], answer))
      self.assertIn(status_words[1], answer["error"])
    with socket.create_connection(("127.0.0.1", self.server.port)) as client:  # leaves early
      client.sendall(b"POST /v1/models/nmt:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 50000000\r\n\r\n{\"instances\": [")
    with socket.create_connection(("127.0.0.1", self.server.port)) as client:
      client.sendall(b"POST /v1/models/nmt:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 30\r\n\r\n{\"instances\": [")
    status, answer = request(url, {"instances": ["a b"]})
    self.assertEqual(status, 200, answer)
    self.assertEqual(answer["predictions"][0]["translation"],
                     self.direct("serving_default", text=["a b"])["translation"][0])

  def test_concurrent_clients_get_the_serial_answers(self):
    """16 clients x 20 requests at once, greedy and beam: each answer equals the answer of the
    same request sent alone."""
    requests = [{"signature_name": ("serving_default", "beam_search")[i % 2],
                 "instances": self.sentences[i % 7:i % 7 + 1 + i % 3]} for i in range(20)]
    serial = [request(self.url + "/versions/1:predict", r) for r in requests]
    self.assertTrue(all(status == 200 for status, _ in serial))

    def client(k):
      return [request(self.url + "/versions/1:predict", requests[(i + k) % 20])
              for i in range(20)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
      answers = list(pool.map(client, range(16)))
    for k, answers_of_k in enumerate(answers):
      for i, (status, answer) in enumerate(answers_of_k):
        self.assertEqual(status, 200, answer)
        want = serial[(i + k) % 20][1]["predictions"]
        self.assertLen(answer["predictions"], len(want))
        for got_row, want_row in zip(answer["predictions"], want):
          _close(self, got_row, want_row, f"client {k} request {i}")

  def test_rest_examples_against_the_server(self):
    out = subprocess.run(["bash", os.path.join(ROOT, "export", "rest_examples.sh")],
                         env={**os.environ, "HOST": self.server.url}, capture_output=True,
                         text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr)
    answers = [json.loads(line) for line in out.stdout.replace("}{", "}\n{").splitlines()
               if line.strip()]
    self.assertLen(answers, 5)
    for answer in answers:
      self.assertNotIn("error", answer)
    self.assertEqual(answers[0]["outputs"]["translation"][1], "")
    self.assertLen(answers[1]["outputs"]["translation"][0], 2)  # version 2: beam 2, 2-best

  def test_an_export_fixes_the_beam(self):
    status, answer = request(self.url + ":predict", {
        "signature_name": "beam_search", "instances": ["a"], "parameters": {"beam_size": 4}})
    self.assertEqual(status, 400)
    self.assertIn("fixed at export (beam_size 2, nbest 2, length_penalty", answer["error"])

  def grpc_predict(self, texts, signature="serving_default", version=None, targets=None,
                   version_label=None):
    request = CLIENT.predict_request(texts, "nmt", signature, version, targets,
                                     version_label=version_label)
    return CLIENT.response_to_dict(self.stub.Predict(request, SAFETY_NET))

  def test_grpc_predict_equals_rest_and_the_signatures(self):
    for signature in ("serving_default", "beam_search"):
      got = self.grpc_predict(self.sentences, signature, version=1)
      _close(self, {k: rest.to_json_value(v) for k, v in got.items()},
             self.direct(signature, text=self.sentences), f"gRPC {signature}")
      _, columnar = request(self.url + "/versions/1:predict", {
          "signature_name": signature, "inputs": {"text": self.sentences}})
      self.assertEqual(CLIENT.to_results(got, signature),
                       CLIENT.to_results(CLIENT.rest_outputs(columnar), signature))
    targets = ["the boy", "a", "", "b c", "d", "e", "f"]
    got = self.grpc_predict(self.sentences, "score", version=1, targets=targets)
    _close(self, {k: rest.to_json_value(v) for k, v in got.items()},
           self.direct("score", source=self.sentences, target=targets), "gRPC score")
    latest = self.stub.Predict(CLIENT.predict_request(["a b"], "nmt", "beam_search"), SAFETY_NET)
    self.assertEqual((latest.model_spec.version.value, latest.model_spec.signature_name),
                     (2, "beam_search"))
    labelled = self.grpc_predict(["a b"], "beam_search", version_label="stable")
    self.assertLen(labelled["translation"][0], 3)  # version 1: beam 3, 3-best
    filtered = CLIENT.predict_request(["a b"], "nmt")
    filtered.output_filter.append("translation")
    self.assertEqual(list(self.stub.Predict(filtered, SAFETY_NET).outputs), ["translation"])

  def test_grpc_metadata_and_status(self):
    request_ = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request_.model_spec.name = "nmt"
    request_.model_spec.version.value = 1
    answer = self.stub.GetModelMetadata(request_, SAFETY_NET)
    self.assertEqual((answer.model_spec.name, answer.model_spec.version.value), ("nmt", 1))
    defs = get_model_metadata_pb2.SignatureDefMap()
    answer.metadata["signature_def"].Unpack(defs)
    _, rest_meta = request(self.url + "/versions/1/metadata")
    self.assertEqual(defs, json_format.ParseDict(rest_meta["metadata"]["signature_def"],
                                                 get_model_metadata_pb2.SignatureDefMap()))
    self.assertEqual(defs.signature_def["serving_default"].inputs["text"].dtype,
                     tf.string.as_datatype_enum)
    models = model_service_pb2_grpc.ModelServiceStub(self.channel)
    status = get_model_status_pb2.GetModelStatusRequest()
    status.model_spec.name = "nmt"
    answer = models.GetModelStatus(status, SAFETY_NET)
    self.assertEqual([(v.version, v.state) for v in answer.model_version_status],
                     [(1, get_model_status_pb2.ModelVersionStatus.AVAILABLE),
                      (2, get_model_status_pb2.ModelVersionStatus.AVAILABLE)])
    status.model_spec.version_label = "canary"
    answer = models.GetModelStatus(status, SAFETY_NET)
    self.assertEqual([v.version for v in answer.model_version_status], [2])

  def test_grpc_refusals_name_the_fault_and_the_server_goes_on(self):
    def request_with(texts=("a",), signature="serving_default", **change):
      message = CLIENT.predict_request(list(texts), "nmt", signature)
      for key, value in change.items():
        if key == "inputs":
          message.inputs.clear()
          for name, proto in value.items():
            message.inputs[name].CopyFrom(proto)
        elif key == "version":
          message.model_spec.version.value = value
        else:
          setattr(message.model_spec, key, value)
      return message
    huge = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"a"])
    huge.tensor_shape.dim.add(size=10**12)
    for message, code, words in (
        (request_with(name="other"), grpc.StatusCode.NOT_FOUND, "Servable not found"),
        (request_with(version=7), grpc.StatusCode.NOT_FOUND, "Specific(nmt, 7)"),
        (request_with(version_label="beta"), grpc.StatusCode.NOT_FOUND, "label: beta"),
        (request_with(signature_name="beam"), grpc.StatusCode.NOT_FOUND,
         "not found in signature def"),
        (request_with(inputs={}), grpc.StatusCode.INVALID_ARGUMENT, "lacks the input 'text'"),
        (request_with(inputs={"text": tf.make_tensor_proto([1.0])}),
         grpc.StatusCode.INVALID_ARGUMENT, "is DT_FLOAT; this signature takes DT_STRING"),
        (request_with(inputs={"text": tf.make_tensor_proto([[b"a"]])}),
         grpc.StatusCode.INVALID_ARGUMENT, "shape [1, 1]"),
        (request_with(inputs={"text": huge}), grpc.StatusCode.INVALID_ARGUMENT,
         "--max_batch_size"),
        (request_with(["a"] * 17), grpc.StatusCode.INVALID_ARGUMENT, "--max_batch_size"),
        (request_with(["x" * 10_000]), grpc.StatusCode.INVALID_ARGUMENT, "--max_text_chars"),
        (request_with(["x" * 300_000]), grpc.StatusCode.RESOURCE_EXHAUSTED, "")):
      with self.assertRaises(grpc.RpcError) as caught:
        self.stub.Predict(message, SAFETY_NET)
      self.assertEqual(caught.exception.code(), code, message.model_spec)
      self.assertIn(words, caught.exception.details())
      self.assertNotIn("\n", caught.exception.details())
    got = self.grpc_predict(["a b"])
    self.assertEqual(rest.to_json_value(got["translation"]),
                     self.direct("serving_default", text=["a b"])["translation"])

  def test_grpc_and_rest_clients_at_once_get_the_serial_answers(self):
    texts = [self.sentences[i % 7:i % 7 + 1 + i % 3] for i in range(12)]
    serial = [self.direct("serving_default", text=t)["translation"] for t in texts]

    def client(k):
      text = texts[k % 12]
      if k % 2:
        got = self.grpc_predict(text, version=1)["translation"]
        return rest.to_json_value(got)
      _, answer = request(self.url + "/versions/1:predict", {"inputs": {"text": text}})
      return answer["outputs"]["translation"]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
      answers = list(pool.map(client, range(48)))
    for k, answer in enumerate(answers):
      self.assertEqual(answer, serial[k % 12], f"client {k}")

  def metrics(self):
    """{(metric sample name, labels as a sorted tuple): value} of the metrics endpoint, read
    with Prometheus' own parser."""
    with urllib.request.urlopen(self.server.url + "/monitoring/prometheus/metrics",
                                timeout=SAFETY_NET) as answer:
      self.assertEqual(answer.headers["Content-Type"], "text/plain; version=0.0.4; "
                       "charset=utf-8")
      text = answer.read().decode("utf-8")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}

  def test_metrics_count_every_answer(self):
    before = self.metrics()
    for _ in range(3):
      self.assertEqual(request(self.url + ":predict", {"instances": ["a b"]})[0], 200)
    self.assertEqual(request(self.url + "/versions/9:predict", {"instances": ["a"]})[0], 404)
    self.assertEqual(request(self.server.url + "/v1/models/x1:predict", {"instances": []})[0],
                     404)
    self.assertEqual(request(self.url + ":predict", {"instances": 3})[0], 400)
    self.grpc_predict(["a b", "c"])
    after = self.metrics()

    def grew(name, **labels):
      key = (name, tuple(sorted(labels.items())))
      return after.get(key, 0) - before.get(key, 0)
    count = ":tensorflow:serving:request_count_total"  # the parser's name of its samples
    self.assertEqual(grew(count, model_name="nmt", status="OK"), 4)
    self.assertEqual(grew(count, model_name="nmt", status="NOT_FOUND"), 1)
    self.assertEqual(grew(count, model_name="", status="NOT_FOUND"), 1)  # no label per name
    self.assertEqual(grew(count, model_name="nmt", status="INVALID_ARGUMENT"), 1)
    latency = ":tensorflow:serving:request_latency"
    self.assertEqual(grew(latency + "_count", model_name="nmt", API="Predict",
                          entrypoint="REST"), 5)
    self.assertEqual(grew(latency + "_count", model_name="nmt", API="Predict",
                          entrypoint="GRPC"), 1)
    self.assertEqual(grew(latency + "_bucket", model_name="nmt", API="Predict",
                          entrypoint="GRPC", le="+Inf"), 1)
    self.assertGreater(grew(latency + "_sum", model_name="nmt", API="Predict",
                            entrypoint="GRPC"), 0)
    sizes = ":nmt_tf:serving:batch_size"
    self.assertEqual(grew(sizes + "_count", model_name="nmt"), 4)  # one batch per request
    self.assertEqual(grew(sizes + "_sum", model_name="nmt"), 5)  # 3 rows by REST, 2 by gRPC
    self.assertEqual(grew(":tensorflow:serving:batching_session:queuing_latency_count",
                          thread_pool_name="model"), 4)

  def test_export_client_over_rest_and_grpc(self):
    want = self.direct("beam_search", text=[self.sentences[0]])
    for where in (f"--rest={self.server.url}", f"--server={self.server.grpc_address}"):
      out = subprocess.run([sys.executable, os.path.join(ROOT, "export", "client.py"), where,
                            "--signature=beam_search", "--version=1", self.sentences[0]],
                           capture_output=True, text=True, timeout=SAFETY_NET, check=False)
      self.assertEqual(out.returncode, 0, out.stderr)
      result = json.loads(out.stdout.splitlines()[0])
      self.assertEqual([h["translation"] for h in result["nbest"]],
                       [t for t, s in zip(want["translation"][0], want["score"][0])
                        if np.isfinite(s)], where)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def _nmt_tf(*args, stdin=None):
  return subprocess.run([sys.executable, "-m", "nmt_tf"] + list(args), cwd=ROOT, input=stdin,
                        capture_output=True, text=True, timeout=SAFETY_NET, check=False)


class ServedRunCase(tf.test.TestCase):
  """A class whose setUpClass calls `serve(run_dir)`: `nmt-tf serve --run_dir` in its own
  process on 127.0.0.1 (`url`), stopped and its `tmp` folder removed after the class."""

  @classmethod
  def serve(cls, run_dir, *flags):
    cls.run_dir = run_dir
    cls.process, cls.url = server_fixtures.serve_process([f"--run_dir={run_dir}", *flags])

  @classmethod
  def tearDownClass(cls):
    cls.process.terminate()
    cls.process.wait(SAFETY_NET)
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  @contextlib.contextmanager
  def browser_page(self, **options):
    """A page of Debian's Chromium, headless (skipped without it, failed in CI), closed after
    the block."""
    self.need_chromium()
    from playwright.sync_api import sync_playwright  # pylint: disable=g-import-not-at-top
    with sync_playwright() as playwright:
      browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
      try:
        yield browser.new_page(**options)
      finally:
        browser.close()

  def need_chromium(self):
    """Skips the test where Debian's Chromium is missing; fails it in CI."""
    if not os.path.exists(CHROMIUM):
      if os.environ.get("CI"):
        self.fail(f"{CHROMIUM} is missing: scripts/setup_browser.sh installs it")
      self.skipTest(f"{CHROMIUM} is missing (scripts/setup_browser.sh installs it)")


@pytest.mark.slow
class ServeCommandTest(ServedRunCase):
  """`nmt-tf serve --run_dir=RUN` of a tiny run, its answers against `nmt-tf translate`, and
  its page in headless Chromium."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    run, _, corpus = make_tiny_run(os.path.join(cls.tmp, "run"))
    cls.sentence = corpus["test"].sources[0]
    cls.grpc_address = f"127.0.0.1:{server_fixtures.free_port()}"
    cls.serve(run.path, f"--grpc_port={cls.grpc_address.rsplit(':', 1)[1]}")

  translations = {}  # (flags, sentence) -> output: each translate process once per class

  def translate(self, *flags, sentence=None):
    key = (flags, sentence or self.sentence)
    if key not in self.translations:
      out = _nmt_tf("translate", f"--run_dir={self.run_dir}", *flags, stdin=key[1] + "\n")
      self.assertEqual(out.returncode, 0, out.stderr)
      self.translations[key] = out.stdout.strip()
    return self.translations[key]

  def test_answers_as_translate(self):
    status, answer = request(self.url + "/v1/models/nmt:predict",
                             {"instances": [self.sentence]})
    self.assertEqual(status, 200, answer)
    self.assertEqual(answer["predictions"][0]["translation"], self.translate("--beam_size=1"))
    status, answer = request(self.url + "/v1/models/nmt:predict",
                             {"signature_name": "beam_search", "instances": [self.sentence]})
    self.assertEqual(answer["predictions"][0]["translation"][0],
                     self.translate("--beam_size=3"))

  def test_bad_prefix_and_constraints_get_400_and_serving_goes_on(self):
    url = self.url + "/v1/models/nmt:predict"
    for body in (
        {"signature_name": "prefix", "instances": [{"text": self.sentence, "prefix": 5}]},
        {"signature_name": "prefix", "instances": [{"text": self.sentence, "prefix": ["a"]}]},
        {"signature_name": "prefix", "instances": [{"text": self.sentence}]},
        {"signature_name": "prefix", "inputs": {"text": [self.sentence], "prefix": ["a", "b"]}},
        {"signature_name": "beam_search_constrained",
         "instances": [{"text": self.sentence, "constraints": ["a", "b"]}]},
        {"signature_name": "beam_search_constrained",
         "instances": [{"text": self.sentence, "constraints": {"a": 1}}]},
        {"signature_name": "beam_search_constrained",
         "inputs": {"text": [self.sentence], "constraints": []}}):
      status, answer = request(url, body)
      self.assertEqual(status, 400, (body, answer))
      self.assertLen(answer["error"].splitlines(), 1, answer)
    status, answer = request(url, {"signature_name": "beam_search_constrained", "instances": [
        {"text": self.sentence, "constraints": "\u00e9\u00e9\u00e9\tzz"}]})
    self.assertEqual(status, 200, answer)  # a phrase the vocabulary cannot spell: no error
    status, answer = request(url, {"signature_name": "prefix",
                                   "instances": [{"text": self.sentence, "prefix": "a"}]})
    self.assertEqual(status, 200, answer)
    self.assertTrue(answer["predictions"][0]["translation"].startswith("a"))

  def test_beam_parameters_per_request(self):
    status, answer = request(self.url + "/v1/models/nmt:predict", {
        "signature_name": "beam_search", "instances": [self.sentence],
        "parameters": {"beam_size": 2, "nbest": 2, "length_penalty": 1.0}})
    self.assertEqual(status, 200, answer)
    nbest = [line.split(" ||| ")[1] for line in self.translate(
        "--beam_size=2", "--nbest=2", "--length_penalty=1.0").splitlines()]
    self.assertEqual(answer["predictions"][0]["translation"], nbest)
    status, answer = request(self.url + "/v1/models/nmt:predict", {
        "signature_name": "beam_search_prefix", "instances": [{"text": self.sentence,
                                                              "prefix": ""}],
        "parameters": {"beam_size": 2, "nbest": 2, "length_penalty": 1.0}})
    self.assertEqual(status, 200, answer)
    self.assertEqual(answer["predictions"][0]["translation"], nbest)
    for signature, parameters, words in (
        ("beam_search", {"beam_size": 99}, "from 1 to 16"),
        ("beam_search", {"beam_size": 2, "nbest": 3}, "from 1 to beam_size=2"),
        ("beam_search", {"length_penalty": "x"}, "length_penalty"),
        ("beam_search", {"width": 2}, "must be an object with some of"),
        ("serving_default", {"beam_size": 2}, "apply to the beam_search, beam_search_prefix"
         ", beam_search_constrained signatures, not serving_default")):
      status, answer = request(self.url + "/v1/models/nmt:predict", {
          "signature_name": signature, "instances": ["a"], "parameters": parameters})
      self.assertEqual(status, 400, parameters)
      self.assertIn(words, answer["error"])

  def test_the_readme_curl_line(self):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
      readme = f.read().replace("\\\n", " ")
    line = next(" ".join(l.split()) for l in readme.splitlines()
                if l.startswith("curl ") and "localhost:8501" in l)
    port = self.url.rsplit(":", 1)[1]
    out = subprocess.run(["bash", "-c", line.replace("localhost:8501", f"127.0.0.1:{port}")],
                         capture_output=True, text=True, timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr)
    answer = json.loads(out.stdout)
    self.assertEqual(answer["outputs"]["translation"][0][0],
                     self.translate("--beam_size=3", sentence="the boy helps the king"))
    self.assertLen(answer["outputs"]["translation"][0], 3)  # the run's beam, whole

  def test_grpc_answers_as_translate(self):
    """export/client.py --server against `nmt-tf serve --grpc_port`, in processes of their
    own."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "export", "client.py"),
                          f"--server={self.grpc_address}", "--signature=beam_search",
                          self.sentence], capture_output=True, text=True, timeout=SAFETY_NET,
                         check=False)
    self.assertEqual(out.returncode, 0, out.stderr)
    self.assertEqual(json.loads(out.stdout)["nbest"][0]["translation"],
                     self.translate("--beam_size=3"))

  def test_user_errors_are_one_line_and_exit_2(self):
    taken = self.url.rsplit(":", 1)[1]
    grpc_taken = self.grpc_address.rsplit(":", 1)[1]
    for args, words in (([f"--run_dir={self.run_dir}", f"--port={taken}"], "cannot listen"),
                        ([f"--run_dir={self.run_dir}", f"--rest_api_port={taken}"],
                         "pass another --port"),
                        ([f"--run_dir={self.run_dir}", f"--grpc_port={grpc_taken}",
                          f"--port={server_fixtures.free_port()}"],
                         "pass another --grpc_port"),
                        ([f"--run_dir={self.run_dir}", "--grpc_port=8501"], "a port each"),
                        ([f"--run_dir={self.run_dir}", "--grpc_port=70000"],
                         "expected a port from 1 to 65535 (0: no gRPC)"),
                        ([f"--run_dir={self.tmp}/missing"], "error:"),
                        ([f"--export_dir={self.tmp}/missing"], "is not a directory"),
                        ([f"--run_dir={self.run_dir}", "--version_labels=stable=4"],
                         "--version_labels")):
      out = subprocess.run([sys.executable, "-m", "nmt_tf", "serve"] + args, cwd=ROOT,
                           capture_output=True, text=True, timeout=SAFETY_NET, check=False)
      self.assertEqual(out.returncode, 2, (args, out.stderr))
      self.assertLen(out.stderr.strip().splitlines(), 1, out.stderr)
      self.assertIn(words, out.stderr)

  def test_page_in_headless_chromium(self):
    self.need_chromium()
    from playwright.sync_api import sync_playwright  # pylint: disable=g-import-not-at-top
    status, answer = request(self.url + "/v1/models/nmt:predict",
                             {"instances": [self.sentence]})
    self.assertEqual(status, 200)
    want = answer["predictions"][0]
    with sync_playwright() as playwright:
      browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
      try:
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(self.url + "/")
        page.fill("#text", self.sentence)
        page.click("#go")
        page.wait_for_selector("table.heatmap")
        self.assertEqual(page.inner_text("#hypotheses li.chosen .text"),
                         self.translate("--beam_size=1"))
        self.assertEqual(page.locator("table.heatmap tbody tr").count(),
                         want["target_length"])
        self.assertEqual(page.locator("table.heatmap thead th.source").count(),
                         want["source_length"])
        self.assertEqual(page.locator("table.heatmap tbody tr").first.locator("td").count(),
                         want["source_length"])
        self.assertEqual(page.locator("table.heatmap td.hard").count(), want["target_length"])
        weight = float(page.locator("table.heatmap td").first.get_attribute("data-weight"))
        self.assertAllClose(weight, want["alignment"][0][0], atol=1e-6)
        page.check("input[value=beam_search]")
        page.click("#go")
        page.wait_for_function("document.querySelectorAll('#hypotheses li').length == 3")
        page.fill("#beam_size", "2")
        page.fill("#nbest", "2")
        page.click("#go")
        page.wait_for_function("document.querySelectorAll('#hypotheses li').length == 2")
        page.fill("#text", "")
        page.click("#go")
        self.assertIn("Type a sentence", page.inner_text("#status"))
        page.fill("#text", self.sentence)
        page.check("input[value=serving_default]")
        page.click("#go")
        page.wait_for_function("document.querySelectorAll('#hypotheses li').length == 1")
        page.screenshot(path=os.environ.get("NMT_TF_SCREENSHOT",
                                            os.path.join(self.tmp, "page.png")), full_page=True)
      finally:
        browser.close()

  def test_page_completes_a_typed_prefix_and_keeps_terms(self):
    def answer(signature, **inputs):
      status, got = request(self.url + "/v1/models/nmt:predict",
                            {"signature_name": signature, "instances": [inputs]})
      self.assertEqual(status, 200, got)
      return got["predictions"][0]

    words = answer("serving_default", text=self.sentence)["words"]
    typed = "the b"
    completion = answer("prefix", text=self.sentence, prefix=typed)
    self.assertTrue(completion["translation"].startswith(typed), completion)
    term = words[-1] if words else "the"
    constrained = answer("beam_search_constrained", text=self.sentence, constraints=term)
    self.assertIn(term, constrained["translation"][0])
    chosen = ("(t) => { const e = document.querySelector('#hypotheses li.chosen .text');"
              " return e && e.textContent === t; }")
    with self.browser_page(viewport={"width": 1100, "height": 760}) as page:
      page.goto(self.url + "/")
      page.fill("#text", self.sentence)
      page.type("#prefix", typed, delay=30)  # no click: the completion follows the typing
      page.wait_for_function(chosen, arg=completion["translation"])
      spans = page.locator("#confidence span.word")
      self.assertEqual(spans.count(), completion["word_count"])
      self.assertEqual(spans.first.inner_text(), completion["words"][0])
      self.assertAllClose(float(spans.first.get_attribute("data-probability")),
                          np.exp(completion["word_log_prob"][0]), atol=1e-5)
      page.fill("#prefix", "")
      page.fill("#terms", term)
      page.click("#go")
      page.wait_for_function(chosen, arg=constrained["translation"][0])


@pytest.mark.slow
class CaptionPageTest(ServedRunCase):
  """`nmt-tf serve` of a shapes captioning run (a few steps), its page with an uploaded image
  in headless Chromium: one attention map per word, the caption `nmt-tf caption` gives."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    import nmt_tf  # pylint: disable=g-import-not-at-top
    from nmt_tf import configs  # pylint: disable=g-import-not-at-top
    cls.tmp = tempfile.mkdtemp()
    config = configs.load("shapes")
    config.data.update(train_size=64, valid_size=8, test_size=4)
    config.model.update(encoder_units=16, decoder_units=16, embedding_dim=8)
    config.train.update(steps=2, eval_every=2, checkpoint_every=2)
    run_dir = os.path.join(cls.tmp, "shapes")
    with open(os.devnull, "w", encoding="utf-8") as log:
      nmt_tf.train(config, run_dir, stream=log)
    cls.image = os.path.join(run_dir, "shapes", "images", "test_00000.png")
    cls.serve(run_dir)

  def test_page_shows_one_map_per_word(self):
    self.need_chromium()
    from playwright.sync_api import sync_playwright  # pylint: disable=g-import-not-at-top
    out = _nmt_tf("caption", f"--run_dir={self.run_dir}", f"--input_file={self.image}",
                  "--beam_size=1")
    self.assertEqual(out.returncode, 0, out.stderr)
    caption = out.stdout.strip().split("\t")[1]
    with open(self.image, "rb") as f:
      status, answer = request(self.url + "/v1/models/nmt_caption:predict", {
          "instances": [{"b64": base64.b64encode(f.read()).decode()}]})
    self.assertEqual(status, 200, answer)
    self.assertEqual(answer["predictions"][0]["caption"], caption)
    with sync_playwright() as playwright:
      browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
      try:
        page = browser.new_page()
        page.goto(self.url + "/")
        page.set_input_files("#image", self.image)
        page.wait_for_function("document.getElementById('preview').src.startsWith('data:')")
        page.click("#go")
        page.wait_for_selector(".word-maps canvas")
        self.assertEqual(page.inner_text("#hypotheses li.chosen .text"), caption)
        self.assertEqual(page.locator(".word-maps canvas").count(),
                         answer["predictions"][0]["caption_length"])
      finally:
        browser.close()
