"""Reserved token ids shared by tokenizers, models and decoding.

Every vocabulary of nmt_tf (SentencePiece or word level) puts these four symbols first, so
the model, the data pipeline and the search agree without passing ids around.
"""

PAD_ID = 0  # padding; masked everywhere (no attention weight, no loss)
UNK_ID = 1  # unknown word (word vocabularies) / unknown piece (SentencePiece)
BOS_ID = 2  # y_0, the first decoder input
EOS_ID = 3  # end of sentence; appended to source and target

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)
