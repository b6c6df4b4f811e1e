"""The conditional GRU of dl4mt / Nematus with the deep output layer, on Multi30k task 1 de->en
(SentencePiece 8k per side, embeddings 256, BiGRU 2 x 512, decoder 512, 2 hours on 2 CPU cores).

  python run.py train --config=configs/cgru_multi30k.py \
      --run_dir=runs/cgru_multi30k

Every field of the experiment is set here (what each means: nmt_tf/experiment/config.py
and the config classes it names); override any on the command line, e.g.
--config.train.steps=100.
"""

from nmt_tf.experiment import base_config


def get_config():
  config = base_config()
  # Corpus (nmt_tf/data/corpus.py).
  config.data.update(
      name="multi30k",
      source_lang="de",
      target_lang="en",
  )
  # Vocabularies.
  config.tokenizer.update(
      kind="sentencepiece",
      vocab_size=8000,
      model_type="unigram",
      shared=False,
      split_punctuation=True,
      min_count=1,
      character_coverage=1.0,
      max_sentences=1000000,
  )
  # Model (docs/MODELS.md); the vocabulary sizes come from the tokenizers.
  config.model.update(
      embedding_dim=256,
      encoder="birnn",
      encoder_units=512,
      encoder_layers=1,
      reverse_source=False,
      conv_kernel_size=3,
      decoder="cgru",
      decoder_units=512,
      output_units=None,  # None: embedding_dim
      attention=None,  # None: the decoder's paper default (additive; general for luong)
      attention_units=None,  # None: decoder_units
      attention_mode="soft",
      hard_inference="expectation",
      gru_reset=None,  # None: the paper's (before for encdec/rnnsearch, after otherwise)
      rnn_cell="gru",
      summary="avg",
      summary_units=None,  # None: decoder_units
      dropout=0.3,
      embedding_init_std=1.0,
  )
  # Batches.
  config.pipeline.update(
      max_source_len=50,
      max_target_len=50,
      reverse_source=False,
      batch_tokens=4096,
      batch_size=0,  # 0: batches by batch_tokens
      bucket_width=2,
      shuffle_buffer=0,
      seed=0,
      eval_batch_size=64,
      tokenize_batch=1024,
  )
  # Optimisation, validation, checkpoints.
  config.train.update(
      steps=30000,
      learning_rate=0.001,
      schedule="inverse_sqrt",
      warmup_steps=500,
      decay_rate=0.5,
      decay_steps=10000,
      clip_norm=1.0,
      label_smoothing=0.1,
      eval_every=500,
      eval_max_sentences=0,
      checkpoint_every=500,
      keep_checkpoints=3,
      patience=10,
      max_minutes=120.0,  # wall-clock budget of the training loop (0 = none)
      precision="float32_bf16_matmul",  # bfloat16 matrix products: 1.3x faster on AMX CPUs
      strategy="default",
      seed=1234,
      log_every=100,
      reinforce_baseline_decay=0.99,
      jit_compile=False,
      alignment_images=3,
  )
  # Search for validation, translate, evaluate and export.
  config.decode.update(
      beam_size=5,
      nbest=1,
      length_penalty=0.6,
      coverage_penalty=0.0,
      max_length=100,
      max_length_a=2.0,
      max_length_b=10.0,
      min_length=0,
      batch_size=64,
      matmul_dtype="float32",
  )
  return config
