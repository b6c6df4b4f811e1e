"""The loop of the tests' helper programs (load_exports.py, run_litert_client.py): one JSON
request per line of stdin, one JSON answer per line of stdout. No TensorFlow import: the
LiteRT client's Python has none."""

import json
import sys


def serve(answer):
  """Answers each request line with answer(request), or {"error": "..."} if it raises."""
  for line in sys.stdin:
    try:
      result = answer(json.loads(line))
    except Exception as error:  # pylint: disable=broad-except  (reported to the test)
      result = {"error": f"{type(error).__name__}: {error}"[:3000]}
    print(json.dumps(result), flush=True)
