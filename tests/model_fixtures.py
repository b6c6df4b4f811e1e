"""Tiny model configurations and batches shared by the model tests.

Seed weights with `keras.utils.set_random_seed`: `tf.random.set_seed` alone does not seed
Keras 3 initializers (their seeds come from Python's `random`), so a model "seeded" with it
differs from process to process.
"""

import tensorflow as tf

from nmt_tf.models import DECODERS, ModelConfig

TINY = dict(src_vocab_size=23, tgt_vocab_size=19, embedding_dim=8, encoder_units=8,
            decoder_units=16, attention_units=12)

# Every decoder with its default options, plus the option values that change the code path.
VARIANTS = {name: dict(decoder=name) for name in DECODERS}
VARIANTS.update({
    "self_attentive_residual_cavg": dict(decoder="self_attentive_residual", summary="cavg"),
    "luong_lstm_dot": dict(decoder="luong", rnn_cell="lstm", attention="dot"),
    "luong_concat": dict(decoder="luong", attention="concat"),
    "rnnsearch_general": dict(decoder="rnnsearch", attention="general"),
    "cgru_rnn_reversed": dict(decoder="cgru", encoder="rnn", reverse_source=True,
                              encoder_units=16),
    "cgru_conv": dict(decoder="cgru", encoder="conv", encoder_layers=2),
    "cgru_embedding": dict(decoder="cgru", encoder="embedding"),
    "encdec_birnn_2layers": dict(decoder="encdec", encoder_layers=2),
    "cgru_hard": dict(decoder="cgru", attention_mode="hard", hard_inference="argmax"),
    "cgru_tied": dict(decoder="cgru", tie_embeddings="target"),
    # Layer norm, a deep transition, both variational dropouts and the lexical model, over
    # the state memory.
    "memory_rnn_deep_ln": dict(decoder="memory_rnn", layer_norm=True, decoder_transition_depth=3,
                               hidden_dropout=0.3, embedding_dropout=0.2, lexical_model=True),
    "luong_tied_all": dict(decoder="luong", tie_embeddings="all", scale_embeddings=True,
                           decoder_units=8, src_vocab_size=19),
})
# The variants the quick tier builds whole: every decoder, and the two variants whose options
# bring modules into the decoder step (layer norm, a deep transition, both dropouts and the
# lexical model; hard attention). The other variants' options (the LSTM, the scores, the
# convolutional and embedding encoders, tied embeddings, ...) have their layers' own quick
# tests, and the whole suite builds every variant.
QUICK_VARIANTS = tuple(DECODERS) + ("memory_rnn_deep_ln", "cgru_hard")


def tiny_config(**overrides):
  return ModelConfig(**{**TINY, **overrides})


def batch():
  """A padded batch: sources of lengths 5, 3, 1 (EOS last); targets of lengths 4, 2, 3."""
  source = tf.constant([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [3, 0, 0, 0, 0]], tf.int32)
  target_in = tf.constant([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 0]], tf.int32)
  target_out = tf.constant([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 3, 0]], tf.int32)
  return {"source": source, "target_in": target_in, "target_out": target_out}


def op_types(fn):
  """The op types of fn's traced graph and of every function it calls (loop bodies, their
  gradients): where a test looks for the compiled cell's ops."""
  graph = tf.function(fn).get_concrete_function().graph
  types = {op.type for op in graph.get_operations()}
  for function in graph.as_graph_def().library.function:
    types.update(node.op for node in function.node_def)
  return types
