"""The self-attentive residual decoder of Werlen et al. 2018 (average summary) on cgru, on the
built-in generated language pair (word vocabularies, a small model that trains in minutes on a
CPU).

  python run.py train --config=configs/sar_avg_generated.py \
      --run_dir=runs/sar_avg_generated

Every field of the experiment is set here (what each means: nmt_tf/experiment/config.py
and the config classes it names); override any on the command line, e.g.
--config.train.steps=100.
"""

from nmt_tf.experiment import base_config


def get_config():
  config = base_config()
  # Corpus (nmt_tf/data/corpus.py).
  config.data.update(
      name="generated",
      seed=0,
      train_size=20000,
      valid_size=200,
      test_size=200,
      max_length=60,
  )
  # Vocabularies.
  config.tokenizer.update(
      kind="word",
      vocab_size=1000,
      model_type="unigram",
      shared=False,
      split_punctuation=True,
      min_count=1,
      character_coverage=1.0,
      max_sentences=1000000,
  )
  # Model (docs/MODELS.md); the vocabulary sizes come from the tokenizers.
  config.model.update(
      embedding_dim=64,
      encoder="birnn",
      encoder_units=64,
      encoder_layers=1,
      reverse_source=False,
      conv_kernel_size=3,
      decoder="self_attentive_residual",
      decoder_units=128,
      output_units=None,  # None: embedding_dim
      attention=None,  # None: the decoder's paper default (additive; general for luong)
      attention_units=None,  # None: decoder_units
      attention_mode="soft",
      hard_inference="expectation",
      gru_reset=None,  # None: the paper's (before for encdec/rnnsearch, after otherwise)
      rnn_cell="gru",
      summary="avg",
      summary_units=None,  # None: decoder_units
      dropout=0.0,
      embedding_init_std=1.0,
  )
  # Batches.
  config.pipeline.update(
      max_source_len=50,
      max_target_len=50,
      reverse_source=False,
      batch_tokens=2048,
      batch_size=0,  # 0: batches by batch_tokens
      bucket_width=2,
      shuffle_buffer=0,
      seed=0,
      eval_batch_size=64,
      tokenize_batch=1024,
  )
  # Optimisation, validation, checkpoints.
  config.train.update(
      steps=1500,
      learning_rate=0.002,
      schedule="constant",
      warmup_steps=0,
      decay_rate=0.5,
      decay_steps=10000,
      clip_norm=1.0,
      label_smoothing=0.0,
      eval_every=500,
      eval_max_sentences=0,
      checkpoint_every=250,
      keep_checkpoints=3,
      patience=0,
      max_minutes=0.0,  # wall-clock budget of the training loop (0 = none)
      precision="float32",  # bfloat16 matrix products: 1.3x faster on AMX CPUs
      strategy="default",
      seed=1234,
      log_every=50,
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
