"""tensorflow-text's SentencePiece ops, loaded without importing the tensorflow_text package.

`import tensorflow_text` loads all of its twenty op libraries and their Python modules: 0.25-0.32
s of every command's start-up on a 2-core AMD EPYC (docs/PERFORMANCE.md, "Start-up of
translate"). The SentencePiece tokenizer needs one of them, `_sentencepiece_tokenizer.so`,
which is loaded here from the installed package's directory, by the same path as
tensorflow_text loads it (TensorFlow loads a library once per path, so the two share it when
both are imported). The graph is the one `tensorflow_text.SentencepieceTokenizer` builds (ops
SentencepieceOp, SentencepieceTokenizeOp, SentencepieceDetokenizeOp,
SentencepieceIdToStringOp, with its defaults: no sampling, no BOS/EOS, no reversal), so an
export runs wherever tensorflow_text is installed, as in TF Serving's model server.
"""

import importlib.util
import os

import tensorflow as tf

_LIBRARY = None


def library():
  """The loaded op library (its generated op functions), loaded at the first call."""
  global _LIBRARY  # pylint: disable=global-statement
  if _LIBRARY is None:
    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None or not spec.origin:
      raise ImportError("SentencePiece tokenization needs the tensorflow-text package; "
                        "install it with `pip install tensorflow-text` (requirements.txt).")
    # tensorflow_text/python/ops/sentencepiece_tokenizer.py loads os.path.join(its directory,
    # name): the same string here, so that TensorFlow sees one library.
    ops_dir = os.path.join(os.path.dirname(spec.origin), "python", "ops")
    _LIBRARY = tf.load_op_library(os.path.join(ops_dir, "_sentencepiece_tokenizer.so"))
  return _LIBRARY


class ModelResource(tf.saved_model.experimental.TrackableResource):
  """The SentencePiece model as a resource under a shared name derived from its bytes.

  tensorflow-text creates a kernel-owned resource (its TODO b/318839908). Such a resource dies
  with its kernel, and eager kernels are dropped whenever the eager kernel cache is cleared,
  which `tf.random.set_seed` does: a tokenizer made before seeding then fails with "Resource
  .../SentencepieceOp... does not exist". In a loaded SavedModel the unnamed source and target
  resources also collided on their node name. A shared name keeps the resource in the resource
  manager, independent of the kernel, and the same model bytes map to the same name.

  Args:
    model_proto: serialized SentencePiece model.
    name: name scope of the op.
    shared_name: the resource's name in the resource manager.
  """

  def __init__(self, model_proto, name, shared_name):
    super().__init__()
    self._model = model_proto
    self._name = name
    self._shared_name = shared_name
    _ = self.resource_handle  # creates the resource

  def _create_resource(self):
    with tf.name_scope(self._name):
      return library().sentencepiece_op(model=self._model, shared_name=self._shared_name)


def tokenize(resource, strings):
  """tf.string [batch] -> int32 ragged [batch, (pieces)]."""
  strings = tf.convert_to_tensor(strings, tf.string)
  if strings.shape.rank != 1:
    raise ValueError(f"Received strings of shape {strings.shape}; expected a vector [batch].")
  values, row_splits = library().sentencepiece_tokenize_op(
      resource.resource_handle, strings, nbest_size=0, alpha=1.0, add_bos=False,
      add_eos=False, reverse=False, out_type=tf.int32, return_nbest=False)
  return tf.RaggedTensor.from_nested_row_splits(values, [row_splits], validate=False)


def detokenize(resource, ids):
  """int ragged [batch, (pieces)] (or dense [batch, pieces]) -> tf.string [batch]."""
  if not isinstance(ids, tf.RaggedTensor):
    ids = tf.RaggedTensor.from_tensor(ids)
  return library().sentencepiece_detokenize_op(resource.resource_handle, ids.flat_values,
                                               ids.row_splits, add_bos=False, add_eos=False,
                                               reverse=False)


def id_to_string(resource, ids):
  """int ids of any (static) rank -> their pieces, tf.string of the same shape."""
  ids = tf.convert_to_tensor(ids)
  flat = tf.reshape(ids, [-1])  # the op takes a vector
  return tf.reshape(library().sentencepiece_id_to_string_op(resource.resource_handle, flat),
                    tf.shape(ids))
