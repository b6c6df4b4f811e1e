"""TF Serving warm-up requests: assets.extra/tf_serving_warmup_requests.

TF Serving replays the PredictionLog records of this TFRecord file when it loads a version,
before the version serves, so the first client requests do not pay for the lazy set-up of
the graph (kernel creation, tokenizer resources, oneDNN primitives for each batch shape).
One record per signature and batch shape: a single sentence and a batch of several, of a
short and a long length. The sentences are made of the source vocabulary's first real
tokens, detokenized: they need no corpus at export time.
"""

import os

import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2

from nmt_tf import special_tokens

WARMUP_FILE = "tf_serving_warmup_requests"  # the name TF Serving looks for in assets.extra/
WARMUP_LENGTHS = (4, 24)  # source tokens of the short and the long warm-up sentences
WARMUP_BATCH = 8


def warmup_sentences(source_tokenizer, lengths=WARMUP_LENGTHS):
  """One detokenized sentence per length, of the source vocabulary's first real tokens."""
  first = len(special_tokens.SPECIAL_TOKENS)
  usable = max(source_tokenizer.vocab_size - first, 1)
  sentences = []
  for length in lengths:
    ids = tf.constant([[first + i % usable for i in range(length)]], tf.int32)  # [1, length]
    sentences.append(source_tokenizer.detokenize(ids).numpy()[0])
  return sentences  # bytes


def _request(model_name, signature, inputs):
  """A PredictRequest of string inputs. export/client.py `predict_request` builds the same
  message; it keeps its own copy because the client must run without nmt_tf installed."""
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model_name
  request.model_spec.signature_name = signature
  for name, values in inputs.items():
    request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string,
                                                       shape=[len(values)]))
  return request


def warmup_requests(model_name, sentences, batch=WARMUP_BATCH, target_languages=()):
  """PredictRequests for every signature: each sentence alone and `batch` copies of it (in
  the first of `target_languages`, a model with target-language tags)."""
  requests = []
  for sentence in sentences:
    for size in (1, batch):
      texts = [sentence] * size
      lang = {"target_lang": [target_languages[0]] * size} if target_languages else {}
      request = lambda name, inputs: _request(model_name, name, {**inputs, **lang})  # pylint: disable=cell-var-from-loop
      requests.append(request("serving_default", {"text": texts}))
      requests.append(request("beam_search", {"text": texts}))
      requests.append(request("prefix", {"text": texts, "prefix": [""] * size}))
      requests.append(request("beam_search_prefix", {"text": texts, "prefix": [""] * size}))
      requests.append(request("beam_search_constrained",
                              {"text": texts, "constraints": [""] * size}))
      requests.append(request("score", {"source": texts, "target": texts}))
  return requests


def write_warmup_file(saved_model_dir, model_name, source_tokenizer, target_languages=()):
  """Writes <saved_model_dir>/assets.extra/tf_serving_warmup_requests; returns its path."""
  directory = os.path.join(saved_model_dir, "assets.extra")
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, WARMUP_FILE)
  with tf.io.TFRecordWriter(path) as writer:
    for request in warmup_requests(model_name, warmup_sentences(source_tokenizer),
                                   target_languages=target_languages):
      log = prediction_log_pb2.PredictionLog(
          predict_log=prediction_log_pb2.PredictLog(request=request))
      writer.write(log.SerializeToString())
  return path
