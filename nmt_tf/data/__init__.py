"""nmt_tf.data: corpora, in-graph tokenizers and tf.data pipelines (see docs/DATA.md).

Typical use by the trainer::

  corpus = data.load_corpus(data.CorpusConfig(name="multi30k/de-en"))  # train: streamed
  src_tok, tgt_tok = data.load_or_train_tokenizers(run_dir, data.TokenizerConfig(),
                                                   corpus["train"])
  train = data.make_train_dataset(corpus["train"], src_tok, tgt_tok, pipeline_config)
  valid = data.make_eval_dataset(corpus["valid"], src_tok, tgt_tok, pipeline_config)
"""

from nmt_tf import lazy
from nmt_tf.data.corpus import CorpusConfig, load_corpus, pair_corpora, SPLITS
from nmt_tf.data.errors import DataError
from nmt_tf.data.generated import generate_corpus, generate_pairs, write_corpus
from nmt_tf.data.multi30k import load_multi30k
from nmt_tf.data.batching import (add_bos_eos, encode_source, encode_target, filter_stats,
                                  FilterStats, PipelineConfig)
from nmt_tf.data.pipeline import make_eval_dataset, make_train_dataset
from nmt_tf.data.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece
from nmt_tf.data.shards import (expand_paths, open_text_shards, ParallelShards, sample_pairs,
                                Shard)
from nmt_tf.data.stream_order import StreamOrder, StreamPosition
from nmt_tf.data.text_files import (decode_line, ParallelText, read_lines, read_parallel,
                                    scan_lines)
from nmt_tf.data.tokenizer import strip_special, Tokenizer
from nmt_tf.data.tokenizer_pair import (load_or_train_tokenizers, load_tokenizers,
                                        sample_texts, save_tokenizers,
                                        TokenizerConfig, train_tokenizers)
from nmt_tf.data.word_tokenizer import WordTokenizer

# TensorFlow Datasets takes 0.1 s to import: its users import it on first use.
__getattr__ = lazy.attributes(__name__, {
    "Multi30k": "nmt_tf.data.multi30k_tfds",
    "load_tfds_translation": "nmt_tf.data.tfds_source",
    "parse_tfds_name": "nmt_tf.data.tfds_source",
})
