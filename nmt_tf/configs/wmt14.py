"""WMT14 English->German (4.5 million pairs; newstest2013 for validation, newstest2014 for
test): a corpus of the size the RNN-attention papers were written for.

  nmt-tf train --config=wmt14:cgru --run_dir=runs/wmt14_cgru

The part after the colon names a model preset (`nmt-tf recipes` lists them; cgru when it is
left out). TFDS downloads and prepares the corpus on first use (docs/DATA.md says how to
prepare it on another machine and pass --config.data.data_dir); the training split is then
streamed from its record files, never held in memory. Sized for a GPU or a many-core CPU: on
2 CPU cores one epoch takes days. Every field not set here keeps the default
of nmt_tf/experiment/config.py (`nmt-tf train --help` lists them).
"""

from nmt_tf.experiment import base_config


def get_config(model="cgru"):
  config = base_config(model)
  config.data.update(name="tfds:wmt14_translate/de-en", source_lang="en", target_lang="de")
  # One SentencePiece model for both languages: they share names, numbers and much of their
  # script, and 32,000 pieces keep most words whole at this corpus size. A million sentences
  # are plenty to train it on; the noisier web-crawled part needs a character coverage below
  # 1 so that stray symbols become <unk> instead of pieces.
  config.tokenizer.update(vocab_size=32000, shared=True, max_sentences=1000000,
                          character_coverage=0.9999)
  # About the sizes of the Edinburgh WMT16 systems (Sennrich et al. 2016: embeddings 500,
  # 1,024 hidden units).
  config.model.update(embedding_dim=512, encoder_units=1024, decoder_units=1024, dropout=0.1)
  # News sentences are longer than image descriptions: keep pairs up to 80 pieces per side.
  config.pipeline.update(max_source_len=80, max_target_len=80, batch_tokens=8192)
  config.train.update(
      steps=300000,
      schedule="inverse_sqrt",
      warmup_steps=4000,
      label_smoothing=0.1,
      # newstest2013 has 3,000 sentences; its greedy BLEU every 5,000 steps, and five
      # checkpoints kept for `nmt-tf average`.
      eval_every=5000,
      checkpoint_every=5000,
      keep_checkpoints=5,
      patience=10,
      log_every=200,
      # bfloat16 products on CPUs with AVX512_BF16 or AMX, else float32; on GPUs set
      # mixed_float16 (or mixed_bfloat16 on A100 and later).
      precision="auto",
  )
  config.decode.update(precision="auto")
  return config
