"""Multi30k task 1 (29,000 image descriptions, de/en/fr) with SentencePiece vocabularies: the
recipe of docs/RESULTS.md.

  nmt-tf train --config=multi30k:cgru --run_dir=runs/multi30k_cgru

The part after the colon names a model preset (`nmt-tf recipes` lists them; cgru when it is
left out); --config.data.source_lang=en --config.data.target_lang=de turns the direction.
Every field not set here keeps the default of nmt_tf/experiment/config.py (`nmt-tf train
--help` lists them): SentencePiece unigram vocabularies of 8,000 pieces per side, embeddings
256, a BiGRU encoder of 2 x 512 and a decoder of 512 units, sentences of at most 50 pieces,
batches of 4,096 tokens; below, what this recipe adds. The data is read from
$NMT_TF_MULTI30K_DIR, or downloaded where the network allows (docs/DATA.md).
"""

from nmt_tf.experiment import base_config, output_input_size


def get_config(model="cgru"):
  config = base_config(model)
  config.data.update(name="multi30k", source_lang="de", target_lang="en")
  # 29,000 short sentences are a few epochs' work for a model of this size, which then
  # overfits: dropout on embeddings and hidden states, and label smoothing.
  config.model.update(dropout=0.3)
  # The embedding tables stored at e^-1/2 of their scale, lookups times e^1/2 (Vaswani et al.
  # 2017), and the output projection tied to the target table (Press and Wolf 2017) where the
  # output layer reads vectors of the embedding size (every preset but luong, whose output
  # reads its 512-unit attentional state); docs/RESULTS.md compares them.
  config.model.update(scale_embeddings=True)
  fields = config.model
  if output_input_size(fields.decoder, fields.decoder_units, fields.output_units,
                       fields.embedding_dim) == fields.embedding_dim:
    fields.update(tie_embeddings="target")
  config.train.update(
      label_smoothing=0.1,
      # Adam with a short linear warm-up, then the inverse square root decay.
      schedule="inverse_sqrt",
      warmup_steps=500,
      # The budget decides the length of a run: the steps are an upper bound.
      steps=30000,
      max_minutes=120.0,
      patience=10,  # validations without a BLEU gain before stopping
      log_every=100,
      # bfloat16 operands for the matrix products where the CPU has AVX512_BF16 or AMX
      # (docs/PERFORMANCE.md), float32 where it would emulate them;
      # the trainer prints its choice at start.
      precision="auto",
  )
  config.decode.update(max_length=100, precision="auto")
  return config
