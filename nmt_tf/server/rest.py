"""TF Serving's REST API (its "RESTful API" page), as JSON in and out, with no server in it.

A predict request is

  {"signature_name": NAME, "instances": [...]}   row format: one entry per batch row
  {"signature_name": NAME, "inputs": {...}}      columnar format: one list per input

and its answer `{"predictions": [...]}` (row) or `{"outputs": {...}}` (columnar); a signature
with one input may take bare values (`"instances": ["a", "b"]`, `"inputs": ["a", "b"]`) and one
with one output answers with bare values. A string may be given as `{"b64": BASE64}`. Errors
are `{"error": MESSAGE}` with the HTTP status of `RequestError.status`.
"""

import base64
import binascii
import json

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from nmt_tf.server.errors import check_batch_sizes, RequestError


# Numpy dtype of each TensorFlow dtype name a signature input may have.
_NUMPY = {"string": object, "float32": np.float32, "float64": np.float64, "int32": np.int32,
          "int64": np.int64, "bool": np.bool_, "uint8": np.uint8}


def parse_json(body):
  """The JSON object of a request body (bytes); RequestError for anything else."""
  if not body or not body.strip():
    raise RequestError("The request body is empty; send a JSON object such as "
                    '{"signature_name": "serving_default", "instances": ["a sentence"]}.')
  try:
    request = json.loads(body.decode("utf-8"))
  except UnicodeDecodeError as error:
    raise RequestError(f"JSON Parse error: the body is not valid UTF-8 (byte {error.start}); "
                    "send UTF-8, or binary strings as {\"b64\": ...}.") from None
  except ValueError as error:
    raise RequestError(f"JSON Parse error: {error}.") from None
  except RecursionError:  # arrays or objects nested deeper than the parser's stack
    raise RequestError("JSON Parse error: the body nests arrays or objects too deeply; a predict "
                    "request needs at most two levels inside \"instances\" or \"inputs\"."
                    ) from None
  if not isinstance(request, dict):
    raise RequestError(f"The request is a JSON {type(request).__name__}; expected an object "
                    "with \"instances\" or \"inputs\".")
  return request


def parse_predict(request, input_specs):
  """(inputs, row_format) of a parsed predict request.

  Args:
    request: the JSON object (see parse_json).
    input_specs: {input name: dtype name} of the signature (see _NUMPY).

  Returns:
    ({input name: numpy array [batch]}, True for the row format).
  """
  if ("instances" in request) == ("inputs" in request):
    raise RequestError("Missing 'instances' or 'inputs' key" if "instances" not in request else
                    "The request has both 'instances' and 'inputs'; send one of them.")
  names = sorted(input_specs)
  if "instances" in request:
    rows = request["instances"]
    if not isinstance(rows, list):
      raise RequestError("'instances' must be a list, one entry per batch row.")
    columns = {name: [] for name in names}
    for i, row in enumerate(rows):
      if not isinstance(row, dict) or (len(names) == 1 and "b64" in row and len(row) == 1):
        if len(names) != 1:
          raise RequestError(f"instances[{i}] is not an object; this signature takes the inputs "
                          f"{names}, named in each instance.")
        row = {names[0]: row}
      _check_names(row, names, f"instances[{i}]")
      for name in names:
        columns[name].append(row[name])
    row_format = True
  else:
    columns = request["inputs"]
    if not isinstance(columns, dict):
      if len(names) != 1:
        raise RequestError(f"'inputs' must be an object naming the inputs {names}.")
      columns = {names[0]: columns}
    _check_names(columns, names, "inputs")
    for name in names:
      if not isinstance(columns[name], list):
        raise RequestError(f"inputs[{name!r}] must be a list, one entry per batch row.")
    row_format = False
  check_batch_sizes({name: columns[name] for name in names})
  return {name: _array(columns[name], input_specs[name], name) for name in names}, row_format


def _check_names(found, names, where):
  missing = [n for n in names if n not in found]
  extra = [n for n in found if n not in names]
  if missing or extra:
    raise RequestError(f"{where} " + (f"lacks the input {missing[0]!r}" if missing else
                                   f"has the unknown input {extra[0]!r}") +
                    f"; this signature takes {names}.")


def _array(values, dtype, name):
  if dtype == "string":
    out = np.empty(len(values), object)
    for i, value in enumerate(values):
      out[i] = _string(value, f"{name}[{i}]")
    return out
  if dtype not in _NUMPY:
    raise RequestError(f"The input {name!r} has dtype {dtype}, which this server cannot read.")
  try:
    return np.asarray(values, _NUMPY[dtype])
  except (TypeError, ValueError):
    raise RequestError(f"The input {name!r} holds values that are not {dtype}.") from None


def _string(value, where):
  if isinstance(value, str):
    try:
      return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, "\ud800" in the JSON
      raise RequestError(f"{where} is not valid Unicode (a lone surrogate); send UTF-8 text."
                      ) from None
  if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
    try:
      return base64.b64decode(value["b64"], validate=True)
    except (binascii.Error, ValueError):
      raise RequestError(f"{where}: the b64 value is not valid base64.") from None
  raise RequestError(f"{where} is a JSON {type(value).__name__}; expected a string or "
                  "{\"b64\": BASE64}.")


def to_json_value(array):
  """A numpy array (or scalar) as JSON-ready lists: strings as text (invalid UTF-8 bytes as
  U+FFFD), numbers as Python numbers."""
  array = np.asarray(array)
  if array.dtype.kind in "OS" and array.size:
    array = np.vectorize(_text, otypes=[object])(array)
  return array.tolist()


def _text(value):
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def predict_answer(outputs, row_format):
  """The JSON object answering a predict request: {output name: numpy [batch, ...]}."""
  names = sorted(outputs)
  if row_format:
    batch = len(next(iter(outputs.values()))) if outputs else 0
    values = {name: to_json_value(outputs[name]) for name in names}
    if len(names) == 1:
      return {"predictions": values[names[0]]}
    return {"predictions": [{name: values[name][i] for name in names} for i in range(batch)]}
  if len(names) == 1:
    return {"outputs": to_json_value(outputs[names[0]])}
  return {"outputs": {name: to_json_value(outputs[name]) for name in names}}


def dumps(answer):
  """JSON text of an answer; NaN and infinities as TF Serving writes them (NaN, -Infinity)."""
  return json.dumps(answer, ensure_ascii=False, allow_nan=True)


def tensor_info(name, dtype, shape):
  """TF Serving's TensorInfo JSON of one signature input or output."""
  return {"dtype": types_pb2.DataType.Name(tf.as_dtype(dtype).as_datatype_enum), "name": name,
          "tensor_shape": {"dim": [{"size": str(-1 if d is None else d), "name": ""}
                                   for d in shape], "unknown_rank": False}}
