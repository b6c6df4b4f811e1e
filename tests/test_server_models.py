"""`nmt-tf serve --model_config_file`: TF Serving's model config (several models, version
policies, labels), versions added and removed while clients send requests, a version that
fails to load; over REST and the official gRPC stub on 127.0.0.1."""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import get_model_status_pb2, model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from nmt_tf.server import model_config, rest, servable
from tests import server_fixtures
from tests import shared_fixtures
from tests.release_fixtures import load_client
from tests.server_fixtures import request, ROOT
from tests.waits import SAFETY_NET

CLIENT = load_client()  # export/client.py


def write_config(path, *models):
  """A model config file of `models`: (name, base_path, policy text, {label: version})."""
  text = "model_config_list {\n"
  for name, base, policy, labels in models:
    text += f'  config {{\n    name: "{name}"\n    base_path: "{base}"\n'
    text += '    model_platform: "tensorflow"\n'
    if policy:
      text += f"    model_version_policy {{ {policy} }}\n"
    for label, version in labels.items():
      text += f'    version_labels {{ key: "{label}" value: {version} }}\n'
    text += "  }\n"
  with open(path, "w", encoding="utf-8") as f:
    f.write(text + "}\n")
  return path


class ModelConfigTest(tf.test.TestCase):
  """model_config.py: the file read as TF Serving reads it, and the versions each policy
  picks."""

  def test_policies(self):
    present = [3, 1, 2, 5]
    self.assertEqual(model_config.ModelEntry("m", "/b").wanted(present), [5])
    self.assertEqual(model_config.ModelEntry("m", "/b", "latest", (2,)).wanted(present), [3, 5])
    self.assertEqual(model_config.ModelEntry("m", "/b", "all", ()).wanted(present),
                     [1, 2, 3, 5])
    self.assertEqual(model_config.ModelEntry("m", "/b", "specific", (2, 4)).wanted(present),
                     [2])
    self.assertEqual(model_config.ModelEntry("m", "/b").wanted([]), [])

  def test_read(self):
    tmp = self.get_temp_dir()
    path = write_config(os.path.join(tmp, "models.config"),
                        ("de_en", "/models/de_en", "", {}),
                        ("en_de", "rel/en_de", "specific { versions: 2 versions: 3 }",
                         {"stable": 2, "canary": 3}),
                        ("cap", "/models/cap", "all {}", {}))
    entries = model_config.read(path)
    self.assertEqual([(e.name, e.policy, e.versions) for e in entries],
                     [("de_en", "latest", (1,)), ("en_de", "specific", (2, 3)),
                      ("cap", "all", ())])
    self.assertEqual(entries[1].labels, {"stable": 2, "canary": 3})
    self.assertEqual(entries[1].base_path, os.path.abspath("rel/en_de"))

  def test_refusals_name_the_fault(self):
    tmp = self.get_temp_dir()
    for text, words in (
        ("model_config_list { config { nam: \"a\" } }", "has no field named \"nam\""),
        ("", "lists no model"),
        ('model_config_list { config { name: "a" } }', "has no base_path"),
        ('model_config_list { config { name: "a" base_path: "/b" } '
         'config { name: "a" base_path: "/c" } }', "is listed twice"),
        ('model_config_list { config { name: "a" base_path: "/b" model_platform: "onnx" } }',
         "model_platform 'onnx'"),
        ('model_config_list { config { name: "a" base_path: "/b" '
         "model_version_policy { specific { } } } }", "names no version")):
      path = os.path.join(tmp, "bad.config")
      with open(path, "w", encoding="utf-8") as f:
        f.write(text)
      with self.assertRaisesRegex(model_config.ModelConfigError, words):
        model_config.read(path)
    with self.assertRaisesRegex(model_config.ModelConfigError, "cannot be read"):
      model_config.read(os.path.join(tmp, "missing.config"))


@pytest.mark.slow
class SeveralModelsTest(tf.test.TestCase):
  """A tiny run exported twice (version 1: beam 3, 3-best; version 2: beam 2, 2-best; the
  session's shared fixture), its versions copied to the base paths of the models each test
  serves."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    export_dir, sources = shared_fixtures.tiny_export_twice()
    cls.exports = os.path.join(export_dir, "nmt")
    cls.sentences = sources[:4]
    cls.nbest = {}  # version -> the beam_search translations of cls.sentences, called alone
    cls.finite = {}
    for version in (1, 2):
      loaded = tf.saved_model.load(os.path.join(cls.exports, str(version)))
      outputs = loaded.signatures["beam_search"](text=tf.constant(cls.sentences))
      cls.nbest[version] = rest.to_json_value(outputs["translation"].numpy())
      # The hypotheses of the first sentence that export/client.py prints (a finite score).
      cls.finite[version] = [t for t, score in zip(cls.nbest[version][0],
                                                   outputs["score"].numpy()[0])
                             if score > -float("inf")]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def base_path(self, name, *versions):
    """A base path holding copies of `versions`."""
    base = os.path.join(self.tmp, self.id().rsplit(".", 1)[1], name)
    for version in versions:
      self.add_version(base, version)
    return base

  def add_version(self, base, version, as_version=None):
    """Copies export version `version` to `base`/`as_version`, renamed into place whole."""
    staged = os.path.join(base, f".{as_version or version}.tmp")
    shutil.copytree(os.path.join(self.exports, str(version)), staged)
    os.rename(staged, os.path.join(base, str(as_version or version)))

  def grpc_beam(self, stub, model, texts, version=None, version_label=None):
    answer = stub.Predict(CLIENT.predict_request(texts, model, "beam_search", version,
                                                 version_label=version_label), SAFETY_NET)
    return answer.model_spec.version.value, \
        rest.to_json_value(CLIENT.response_to_dict(answer)["translation"])

  def test_two_models_from_one_config_answer_at_once(self):
    config = write_config(os.path.join(self.tmp, "two.config"),
                          ("de_en", self.base_path("de_en", 1), "", {}),
                          ("en_de", self.base_path("en_de", 1, 2), "all {}",
                           {"stable": 1, "canary": 2}))
    served = [servable.load_entry(e) for e in model_config.read(config)]
    server = server_fixtures.ThreadServer(served, grpc=True)
    channel = grpc.insecure_channel(server.grpc_address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    try:
      asks = [("de_en", {}, 1), ("en_de", {}, 2), ("en_de", {"version_label": "stable"}, 1),
              ("en_de", {"version": 2}, 2)] * 6

      def ask(k):
        model, spec, want = asks[k]
        if k % 2:
          return want, self.grpc_beam(stub, model, self.sentences, **spec)
        path = {"version_label": f"/labels/{spec.get('version_label')}",
                "version": f"/versions/{spec.get('version')}"}.get(next(iter(spec), None), "")
        status, answer = request(f"{server.url}/v1/models/{model}{path}:predict", {
            "signature_name": "beam_search", "inputs": {"text": self.sentences}})
        self.assertEqual(status, 200, answer)
        return want, (None, answer["outputs"]["translation"])
      with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(len(asks))))
      for k, (want, (version, translation)) in enumerate(answers):
        self.assertIn(version, (None, want), k)
        self.assertEqual(translation, self.nbest[want], k)
      status, answer = request(f"{server.url}/v1/models/de_en/versions/2:predict",
                               {"instances": ["a"]})
      self.assertEqual(status, 404, answer)  # latest: version 1 only
      with urllib.request.urlopen(server.url + "/?model=en_de", timeout=SAFETY_NET) as page:
        self.assertIn("&quot;model&quot;: &quot;en_de&quot;", page.read().decode("utf-8"))
      models = model_service_pb2_grpc.ModelServiceStub(channel)
      message = get_model_status_pb2.GetModelStatusRequest()
      message.model_spec.name = "en_de"
      self.assertEqual([v.version for v in models.GetModelStatus(message, SAFETY_NET)
                        .model_version_status], [1, 2])
    finally:
      channel.close()
      server.stop()

  def test_versions_come_and_go_under_load(self):
    """8 clients (gRPC and REST) send requests while version 2 arrives (and takes over),
    version 1 goes, and a broken version 3 fails to load: none fails, and each answer is the
    serial answer of the version that gave it."""
    base = self.base_path("nmt", 1)
    entry = model_config.ModelEntry("nmt", base, "latest", (1,))
    server = server_fixtures.ThreadServer([servable.load_entry(entry)], grpc=True,
                                          poll_seconds=0.1)
    channel = grpc.insecure_channel(server.grpc_address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    stop, answers, errors = threading.Event(), [], []

    def client(k):
      while not stop.is_set():
        try:
          if k % 2:
            answers.append(self.grpc_beam(stub, "nmt", self.sentences))
          else:
            status, answer = request(server.url + "/v1/models/nmt:predict", {
                "signature_name": "beam_search", "inputs": {"text": self.sentences}})
            if status != 200:
              errors.append(answer)
            else:
              answers.append((None, answer["outputs"]["translation"]))
        except Exception as error:  # pylint: disable=broad-exception-caught
          errors.append(repr(error))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    try:
      for thread in threads:
        thread.start()
      time.sleep(1)
      self.add_version(base, 2)
      self.wait_for(server, lambda status: [v["version"] for v in status] == ["2"])
      os.makedirs(os.path.join(base, "3"))
      with open(os.path.join(base, "3", "saved_model.pb"), "wb") as f:
        f.write(b"not a SavedModel")
      self.wait_for(server, lambda status: [(v["version"], v["state"]) for v in status] ==
                    [("2", "AVAILABLE"), ("3", "END")])
      time.sleep(0.5)
    finally:
      stop.set()
      for thread in threads:
        thread.join(SAFETY_NET)
    try:
      self.assertEqual(self.grpc_beam(stub, "nmt", self.sentences)[0], 2)
      self.assertEqual(errors, [])
      versions = {version for version, _ in answers}
      self.assertEqual(versions - {None}, {1, 2})
      for version, translation in answers:
        if version is None:
          self.assertIn(translation, (self.nbest[1], self.nbest[2]))
        else:
          self.assertEqual(translation, self.nbest[version], version)
      status = request(server.url + "/v1/models/nmt/versions/3")[1]["model_version_status"]
      self.assertIn("does not load as a SavedModel", status[0]["status"]["error_message"])
      self.assertEqual(server.reports[:2], ["model nmt: version 2 serving",
                                            "model nmt: version 1 no longer served"])
      self.assertIn("model nmt version 3 not served:", server.reports[2])
      self.assertLen(server.reports, 3)  # the broken version is not tried again
    finally:
      channel.close()
      server.stop()

  def wait_for(self, server, test, timeout=SAFETY_NET, model="nmt"):
    deadline = time.time() + timeout
    while time.time() < deadline:
      status = request(f"{server.url}/v1/models/{model}")[1].get("model_version_status")
      if status and test(status):
        return
      time.sleep(0.05)
    self.fail(f"the versions did not change in time: {status}; {server.reports}")

  def test_reload_config_and_a_model_waiting_for_its_first_version(self):
    """ModelService.HandleReloadConfigRequest: the new config's models answer once it returns
    (a model whose base path is empty answers NOT_FOUND until a version is exported there),
    the models it drops stop answering, and a config that cannot be served is refused with
    INVALID_ARGUMENT, changing nothing. About a minute on 2 cores: eight SavedModels load
    (three configs, a version arriving, three refused configs), each as the server loads one,
    since a reload is the loading of versions."""
    de_en = self.base_path("de_en", 1)
    later = os.path.join(os.path.dirname(de_en), "later")
    reports = []
    served = [servable.load_entry(model_config.ModelEntry(name, base), reports.append)
              for name, base in (("de_en", de_en), ("later", later))]
    self.assertEqual(reports, [f"model later: no version under {later} yet; served once one "
                               "is exported there"])
    server = server_fixtures.ThreadServer(served, grpc=True, poll_seconds=0.1)
    channel = grpc.insecure_channel(server.grpc_address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    models = model_service_pb2_grpc.ModelServiceStub(channel)

    def reload(*configs):
      path = write_config(os.path.join(self.tmp, "reload.config"), *configs)
      message = model_management_pb2.ReloadConfigRequest()
      with open(path, encoding="utf-8") as f:
        text_format.Parse(f.read(), message.config)
      return models.HandleReloadConfigRequest(message, SAFETY_NET)
    try:
      en_de = ("en_de", self.base_path("en_de", 1, 2), "all {}", {"stable": 1})
      answer = reload(("de_en", de_en, "", {}), en_de, ("later", later, "", {}))
      self.assertEqual(answer.status.error_code, 0)
      self.assertEqual(self.grpc_beam(stub, "en_de", self.sentences),
                       (2, self.nbest[2]))
      self.assertEqual(self.grpc_beam(stub, "en_de", self.sentences, version_label="stable"),
                       (1, self.nbest[1]))
      self.assertEqual(self.grpc_beam(stub, "de_en", self.sentences)[0], 1)
      with self.assertRaises(grpc.RpcError) as caught:
        self.grpc_beam(stub, "later", self.sentences)
      self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
      self.add_version(later, 2, as_version=3)
      self.wait_for(server, lambda status: [v["version"] for v in status] == ["3"],
                    model="later")
      self.assertEqual(self.grpc_beam(stub, "later", self.sentences), (3, self.nbest[2]))
      broken = os.path.join(os.path.dirname(de_en), "broken", "1")
      os.makedirs(broken)
      with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
        f.write(b"not a SavedModel")
      for configs, words in (
          ([("de_en", de_en, "", {"stable": 4})], "label 'stable' names version 4"),
          ([("x", os.path.dirname(broken), "", {})], "does not load as a SavedModel"),
          ([("de_en", de_en, "", {}), ("de_en", later, "", {})], "is listed twice")):
        with self.assertRaises(grpc.RpcError) as caught:
          reload(*configs)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(words, caught.exception.details())
        self.assertEqual(self.grpc_beam(stub, "en_de", self.sentences)[0], 2)
      reload(en_de)
      with self.assertRaises(grpc.RpcError) as caught:
        self.grpc_beam(stub, "de_en", self.sentences)
      self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
      self.assertEqual(request(server.url + "/v1/models/later")[0], 404)
      self.assertIn("model de_en no longer served", server.reports)
    finally:
      channel.close()
      server.stop()

  def test_the_command(self):
    """`nmt-tf serve --model_config_file=export/models.config` (its /models rewritten to a
    folder of exports, as docs/SERVE.md shows) in its own process, asked by export/client.py
    over gRPC for each label; a config it cannot follow is one line, exit 2."""
    models = os.path.dirname(self.base_path("nmt", 1, 2))
    with open(os.path.join(ROOT, "export", "models.config"), encoding="utf-8") as f:
      text = f.read().replace('"/models/', f'"{models}/')
    config = os.path.join(self.tmp, "models.config")
    with open(config, "w", encoding="utf-8") as f:
      f.write(text)
    grpc_port = server_fixtures.free_port()
    process, _ = server_fixtures.serve_process([f"--model_config_file={config}",
                                                f"--grpc_port={grpc_port}"])
    try:
      for label, version in (("stable", 1), ("canary", 2)):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "export", "client.py"),
                              f"--server=127.0.0.1:{grpc_port}", f"--version_label={label}",
                              "--signature=beam_search", self.sentences[0]],
                             capture_output=True, text=True, timeout=SAFETY_NET, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual([h["translation"] for h in json.loads(out.stdout)["nbest"]],
                         self.finite[version])
    finally:
      process.terminate()
      process.wait(SAFETY_NET)
    bad = write_config(os.path.join(self.tmp, "bad.config"),
                       ("nmt", os.path.join(models, "nmt"), "", {"stable": 4}))
    for args, words in (([f"--model_config_file={bad}"], "label 'stable' names version 4"),
                        ([f"--model_config_file={config}", "--export_dir=x"],
                         "drop --export_dir"),
                        ([f"--model_config_file={self.tmp}/none.config"], "cannot be read")):
      out = subprocess.run([sys.executable, "-m", "nmt_tf", "serve",
                            f"--port={server_fixtures.free_port()}"] + args, cwd=ROOT,
                           capture_output=True, text=True, timeout=SAFETY_NET, check=False)
      self.assertEqual(out.returncode, 2, (args, out.stderr))
      self.assertLen(out.stderr.strip().splitlines(), 1, out.stderr)
      self.assertIn(words, out.stderr)


if __name__ == "__main__":
  tf.test.main()
