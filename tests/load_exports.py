"""Loads exported SavedModels as TF Serving does, with only tensorflow and tensorflow_text.

Run as a program (never imported by the tests' own process): each line of stdin is a JSON
request {"path": SAVED_MODEL_DIR, "text": [sentences]} (and "target_lang": LANG for a
model with target-language tags); for each, the model is loaded and
every signature is called once on the sentences and once on an empty batch, and one JSON line
answers: {"greedy": [translations], "greedy_tokens": [[target tokens, EOS last]],
"greedy_log_prob": [...], "truncated": [...], "beam": [[translations] per sentence],
"score": [log P(greedy translation | sentence)], "empty": {signature: {output: [dtype,
shape...]}}} or {"error": "..."}. Sentences with invalid UTF-8 come as "text_base64" instead
of "text". A captioning export's request has "images" (image file paths) instead, and its
answer is caption_answer's. A process can serve many requests, so that
the tests pay TensorFlow's start-up once.
"""

import base64
import sys

import json_lines  # tests/json_lines.py, beside this program
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers the SentencePiece ops)


def caption_answer(model, request):
  """A captioning export: {"caption": [captions], "caption_length": [...], "attention":
  [[weights over the cells] per word] per image, "beam": [[captions] per image], "empty"}."""
  data = tf.constant([open(path, "rb").read() for path in request["images"]], tf.string)
  greedy = model.signatures["serving_default"](image_bytes=data)
  beam = model.signatures["beam_search"](image_bytes=data)
  empty = tf.constant([], tf.string)
  empties = {name: model.signatures[name](image_bytes=empty)
             for name in ("serving_default", "beam_search")}
  return {
      "caption": [t.decode("utf-8") for t in greedy["caption"].numpy()],
      "caption_length": greedy["caption_length"].numpy().tolist(),
      "attention": greedy["attention"].numpy().tolist(),
      "beam": [[t.decode("utf-8") for t in row] for row in beam["caption"].numpy()],
      "empty": {name: {key: [value.dtype.name] + value.shape.as_list()
                       for key, value in outputs.items()}
                for name, outputs in empties.items()},
      "modules": sorted({name.split(".")[0] for name in sys.modules
                         if name.startswith(("nmt_tf", "tests"))}),
  }


def answer(request):
  model = tf.saved_model.load(request["path"])
  if "images" in request:
    return caption_answer(model, request)
  if "text_base64" in request:
    text = tf.constant([base64.b64decode(t) for t in request["text_base64"]], tf.string)
  else:
    text = tf.constant(request["text"], tf.string)
  # A model with target-language tags: every sentence into the request's "target_lang".
  lang = lambda n: ({"target_lang": tf.constant([request["target_lang"]] * n, tf.string)}  # pylint: disable=g-long-lambda
                    if "target_lang" in request else {})
  n = int(tf.size(text))
  greedy = model.signatures["serving_default"](text=text, **lang(n))
  beam = model.signatures["beam_search"](text=text, **lang(n))
  score = model.signatures["score"](source=text, target=greedy["translation"], **lang(n))
  empty = tf.constant([], tf.string)
  empties = {"serving_default": model.signatures["serving_default"](text=empty, **lang(0)),
             "beam_search": model.signatures["beam_search"](text=empty, **lang(0)),
             "score": model.signatures["score"](source=empty, target=empty, **lang(0))}
  return {
      "greedy": [t.decode("utf-8") for t in greedy["translation"].numpy()],
      "greedy_log_prob": greedy["log_prob"].numpy().tolist(),
      "greedy_tokens": [[t.decode("utf-8") for t in row[:n]] for row, n in zip(
          greedy["target_tokens"].numpy(), greedy["target_length"].numpy())],
      "truncated": greedy["truncated"].numpy().tolist(),
      "beam": [[t.decode("utf-8") for t in row] for row in beam["translation"].numpy()],
      "score": score["log_prob"].numpy().tolist(),
      "empty": {name: {key: [value.dtype.name] + value.shape.as_list()
                       for key, value in outputs.items()}
                for name, outputs in empties.items()},
      "modules": sorted({name.split(".")[0] for name in sys.modules
                         if name.startswith(("nmt_tf", "tests"))}),
  }


if __name__ == "__main__":
  json_lines.serve(answer)
