"""The OpenNMT-tf anchor model: the size of nmt_tf's reference model and Joey NMT's anchor.

Embeddings 256 (source and target tables of the shared SentencePiece 8k), a bidirectional
GRU encoder of 512 units per direction (annotations of 1,024, concatenated), an attentional
GRU decoder of 512 units with Bahdanau's additive attention and a dense bridge from the
encoder's final state, dropout 0.2. Passed to `onmt-main --model`.
"""

import opennmt
import tensorflow as tf
import tensorflow_addons as tfa


class AnchorRNN(opennmt.models.SequenceToSequence):
  """BiGRU 2 x 512 encoder, GRU 512 decoder with additive attention."""

  def __init__(self):
    super().__init__(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
        encoder=opennmt.encoders.RNNEncoder(
            num_layers=1, num_units=512, bidirectional=True, residual_connections=False,
            dropout=0.2, reducer=opennmt.layers.ConcatReducer(),
            cell_class=tf.keras.layers.GRUCell),
        decoder=opennmt.decoders.AttentionalRNNDecoder(
            num_layers=1, num_units=512, bridge_class=opennmt.layers.DenseBridge,
            attention_mechanism_class=tfa.seq2seq.BahdanauAttention,
            cell_class=tf.keras.layers.GRUCell, dropout=0.2, residual_connections=False))


model = AnchorRNN
