"""Which ops a SavedModel uses, and whether TF Serving's model server can run them.

The model server links TensorFlow's core ops and the tensorflow_text ops, nothing that calls
back into Python. `saved_model_ops` walks the graph of saved_model.pb and every function of
its function library (tf.function bodies, while-loop bodies...), `allowed_ops` is the core
op registry of a plain `import tensorflow` minus the Python-callback ops plus the
tensorflow_text ops our tokenizers use.
"""

import json
import os
import subprocess
import sys

from tensorflow.core.protobuf import saved_model_pb2

# Ops that run Python code: the model server has no interpreter.
FORBIDDEN_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# tensorflow_text ops of SentencePieceTokenizer (tokenize, detokenize, id_to_token);
# TF Serving's model server links tensorflow_text.
TF_TEXT_OPS = frozenset({
    "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp",
    "SentencepieceIdToStringOp", "SentencepieceStringToIdOp", "SentencepieceVocabSizeOp",
})

_LIST_CORE_OPS = """
import json
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as session
ops = op_def_pb2.OpList()
ops.ParseFromString(session.TF_GetBuffer(session.TF_GetAllOpList()))
print(json.dumps(sorted(op.name for op in ops.op)))
"""


class ForbiddenOpError(ValueError):
  """A SavedModel uses an op the TF Serving model server cannot run."""


def saved_model_ops(path):
  """Names of every op in <path>/saved_model.pb (graphs and function libraries)."""
  saved = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved.ParseFromString(f.read())
  names = set()
  for meta_graph in saved.meta_graphs:
    graph = meta_graph.graph_def
    names.update(node.op for node in graph.node)
    for function in graph.library.function:
      names.update(node.op for node in function.node_def)
  # Calls of library functions appear as ops named after the function: not kernels.
  functions = {f.signature.name for m in saved.meta_graphs for f in m.graph_def.library.function}
  return names - functions


def core_op_names():
  """Ops registered by a plain `import tensorflow` (in a fresh interpreter, since this one
  may have imported tensorflow_text or other op libraries)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, "-c", _LIST_CORE_OPS], check=True, env=env,
                       capture_output=True, text=True, timeout=300).stdout
  return frozenset(json.loads(out.strip().splitlines()[-1]))


def allowed_ops():
  """The allow-list: core TF ops minus FORBIDDEN_OPS, plus TF_TEXT_OPS."""
  return (core_op_names() - FORBIDDEN_OPS) | TF_TEXT_OPS


def disallowed_ops(path, allowed=None):
  """Sorted ops of the SavedModel at `path` outside `allowed` (default `allowed_ops()`)."""
  allowed = allowed_ops() if allowed is None else allowed
  return sorted(saved_model_ops(path) - allowed)


def check_forbidden_ops(path):
  """Raises ForbiddenOpError if the SavedModel at `path` calls back into Python."""
  bad = sorted(saved_model_ops(path) & FORBIDDEN_OPS)
  if bad:
    raise ForbiddenOpError(f"The SavedModel at {path} uses {bad}, which TF Serving cannot run; "
                           "replace tf.py_function/tf.numpy_function with TensorFlow ops.")
