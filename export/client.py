"""A small client for the nmt_tf model served by TF Serving (gRPC or REST).

  python export/client.py --server=localhost:8500 "ein Satz" "noch einer"
  python export/client.py --rest=http://localhost:8501 --signature=beam_search "ein Satz"
  python export/client.py --server=localhost:8500 --signature=score \
      --target="a sentence" "ein Satz"
  python export/client.py --server=localhost:8500 --target_lang=fr "ein Satz"
  python export/client.py --server=localhost:8500 --version_label=canary "ein Satz"

Requests are built here (`predict_request`, `rest_body`); the answers of both protocols go
through `response_to_dict` / `rest_outputs` to the same numpy dict, and `to_results` turns
it into one JSON-friendly dict per sentence. Signatures and outputs: docs/EXPORT.md.
"""

import argparse
import json
import sys
import urllib.request

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

SIGNATURES = ("serving_default", "beam_search", "score")
STRING_OUTPUTS = ("translation", "source_tokens", "target_tokens")


def _check_signature(signature_name):
  if signature_name not in SIGNATURES:
    raise ValueError(f"Received signature_name={signature_name!r}; expected one of "
                     f"{SIGNATURES}.")


def _inputs(signature_name, texts, targets, target_lang=None):
  """{input name: list of str} of one request; `target_lang` (one language for every
  sentence) fills the "target_lang" input of a model with target-language tags."""
  _check_signature(signature_name)
  languages = {} if target_lang is None else {"target_lang": [target_lang] * len(texts)}
  if signature_name != "score":
    return {"text": list(texts), **languages}
  if targets is None or len(targets) != len(texts):
    raise ValueError(f"Received {len(texts)} sources and "
                     f"{'no' if targets is None else len(targets)} targets; the score "
                     "signature needs one target per source.")
  return {"source": list(texts), "target": list(targets), **languages}


def predict_request(texts, model_name="nmt", signature_name="serving_default", version=None,
                    targets=None, target_lang=None, version_label=None):
  """A gRPC PredictRequest: `texts` (str or bytes) in input "text", or ("source", "target")
  for the score signature; "target_lang" too when `target_lang` is given. The version asked
  is `version` or `version_label` (a label of the server's model config), else the latest."""
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model_name
  request.model_spec.signature_name = signature_name
  if version is not None:
    request.model_spec.version.value = int(version)
  elif version_label is not None:
    request.model_spec.version_label = version_label
  for name, values in _inputs(signature_name, texts, targets, target_lang).items():
    data = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
    request.inputs[name].CopyFrom(tf.make_tensor_proto(data, dtype=tf.string,
                                                       shape=[len(data)]))
  return request


def request_inputs(request):
  """{input name: numpy array} of a PredictRequest (what the server feeds the signature)."""
  return {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}


def response_to_dict(response):
  """PredictResponse -> {output name: numpy array}, token and translation strings as str."""
  return _decode({name: tf.make_ndarray(proto) for name, proto in response.outputs.items()})


def rest_body(texts, signature_name="serving_default", targets=None, target_lang=None):
  """JSON body of POST /v1/models/<name>[/versions/<v>]:predict (columnar "inputs")."""
  inputs = {name: [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                   for v in values]
            for name, values in _inputs(signature_name, texts, targets, target_lang).items()}
  return {"signature_name": signature_name, "inputs": inputs}


def rest_outputs(answer):
  """The parsed JSON answer of a columnar :predict call -> {output name: numpy array}."""
  outputs = answer["outputs"]
  if not isinstance(outputs, dict):  # a signature with one output answers with its value
    raise ValueError("Received a REST answer whose 'outputs' is not a dict; expected the "
                     "named outputs of an nmt_tf signature.")
  return _decode({name: np.asarray(value) for name, value in outputs.items()})


def _decode(outputs):
  for name in STRING_OUTPUTS:
    if name in outputs:
      outputs[name] = np.vectorize(
          lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v),
          otypes=[object])(outputs[name])
  return outputs


def to_results(outputs, signature_name="serving_default"):
  """{output: array} of one batch -> one dict per sentence, padding removed.

  serving_default: translation, log_prob, truncated, source_tokens, target_tokens and
  alignment [target_len][source_len]; beam_search: truncated, source_tokens and `nbest`,
  a list of such hypotheses with `score` (missing ones, score -inf, left out); score:
  log_prob, target_length, truncated.
  """
  _check_signature(signature_name)
  if signature_name == "score":
    return [{"log_prob": float(lp), "target_length": int(n), "truncated": bool(t)}
            for lp, n, t in zip(outputs["log_prob"], outputs["target_length"],
                                outputs["truncated"])]
  results = []
  for i in range(len(outputs["truncated"])):
    src_len = int(outputs["source_length"][i])
    result = {"truncated": bool(outputs["truncated"][i]),
              "source_tokens": list(outputs["source_tokens"][i][:src_len])}
    if signature_name == "serving_default":
      result.update(_hypothesis(outputs, (i,), src_len))
    else:
      result["nbest"] = [_hypothesis(outputs, (i, k), src_len)
                         for k in range(len(outputs["translation"][i]))
                         if np.isfinite(outputs["score"][i][k])]
    results.append(result)
  return results


def _hypothesis(outputs, index, src_len):
  tgt_len = int(outputs["target_length"][index])
  hypothesis = {
      "translation": outputs["translation"][index],
      "log_prob": float(outputs["log_prob"][index]),
      "target_tokens": list(outputs["target_tokens"][index][:tgt_len]),
      "alignment": np.asarray(outputs["alignment"][index])[:tgt_len, :src_len].tolist(),
  }
  if "score" in outputs:
    hypothesis["score"] = float(outputs["score"][index])
  return hypothesis


def predict_grpc(address, request, timeout=30.0):
  """Sends a PredictRequest to a model server's gRPC port ("host:8500")."""
  import grpc  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.apis import prediction_service_pb2_grpc  # pylint: disable=g-import-not-at-top
  with grpc.insecure_channel(address) as channel:
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    return stub.Predict(request, timeout)


def predict_rest(base_url, model_name, body, version=None, timeout=30.0, version_label=None):
  """POSTs `body` to <base_url>/v1/models/<model_name>[/versions/<version> |
  /labels/<version_label>]:predict."""
  url = f"{base_url.rstrip('/')}/v1/models/{model_name}"
  if version is not None:
    url += f"/versions/{version}"
  elif version_label is not None:
    url += f"/labels/{version_label}"
  url += ":predict"
  data = json.dumps(body).encode("utf-8")
  request = urllib.request.Request(url, data=data,
                                   headers={"Content-Type": "application/json"})
  with urllib.request.urlopen(request, timeout=timeout) as answer:
    return json.loads(answer.read().decode("utf-8"))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  where = parser.add_mutually_exclusive_group(required=True)
  where.add_argument("--server", help="gRPC address host:port (model server --port)")
  where.add_argument("--rest", help="REST base URL, e.g. http://localhost:8501")
  parser.add_argument("--model_name", default="nmt")
  which = parser.add_mutually_exclusive_group()
  which.add_argument("--version", type=int, default=None)
  which.add_argument("--version_label", default=None,
                     help="a label of the server's model config (stable, canary, ...)")
  parser.add_argument("--signature", default="serving_default", choices=SIGNATURES)
  parser.add_argument("--target", action="append", default=None,
                      help="score: one target per source sentence (repeat the flag)")
  parser.add_argument("--target_lang", default=None,
                      help="target language of every sentence, for a model exported with "
                           "target-language tags (its nmt_export.json lists them)")
  parser.add_argument("texts", nargs="*", help="sentences; none = one per line on stdin")
  args = parser.parse_args(argv)
  texts = args.texts or [line.rstrip("\n") for line in sys.stdin]
  if args.server:
    request = predict_request(texts, args.model_name, args.signature, args.version,
                              args.target, args.target_lang, args.version_label)
    outputs = response_to_dict(predict_grpc(args.server, request))
  else:
    answer = predict_rest(args.rest, args.model_name,
                          rest_body(texts, args.signature, args.target, args.target_lang),
                          args.version, version_label=args.version_label)
    outputs = rest_outputs(answer)
  for result in to_results(outputs, args.signature):
    print(json.dumps(result, ensure_ascii=False))
  return 0


if __name__ == "__main__":
  sys.exit(main())
