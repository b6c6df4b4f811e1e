"""Translates with a LiteRT export's own client, in a Python without TensorFlow.

Run as a program by the tests (never imported by them), with the interpreter of a virtualenv
that holds only ai-edge-litert, numpy and sentencepiece. Each line of stdin is a JSON request
{"model_dir": DIR, "text_base64": [sentences as base64 bytes], "beam": bool, "threads": N};
one JSON line answers {"translations": [{"text", "target_tokens", "log_prob", "score",
"truncated", "alignment_shape", "alternatives": [texts]}], "tensorflow": whether this Python
can import it} or {"error": "..."}.
"""

import base64
import importlib.util
import sys

import json_lines  # tests/json_lines.py, beside this program


def answer(request):
  sys.path.insert(0, request["model_dir"])
  try:
    import nmt_litert  # pylint: disable=import-outside-toplevel  (the export's nmt_litert.py)
  finally:
    sys.path.pop(0)
  translator = nmt_litert.LiteRTTranslator(request["model_dir"], request.get("threads"))
  sentences = [base64.b64decode(t) for t in request["text_base64"]]
  results = translator.translate(sentences, beam=request.get("beam", False))
  del sys.modules["nmt_litert"]
  return {
      "translations": [{
          "text": t.text, "target_tokens": t.target_tokens, "log_prob": t.log_prob,
          "score": t.score, "truncated": t.truncated,
          "alignment_shape": list(t.alignment.shape),
          "alternatives": [a.text for a in t.alternatives]} for t in results],
      "tensorflow": importlib.util.find_spec("tensorflow") is not None,
  }


if __name__ == "__main__":
  json_lines.serve(answer)
