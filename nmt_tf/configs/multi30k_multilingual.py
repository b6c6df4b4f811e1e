"""Multi30k German->English and German->French in one model, with target-language tags
(Johnson et al. 2017): docs/TRAINING.md "Several languages in one model".

  nmt-tf train --config=multi30k_multilingual --run_dir=runs/multi30k_de_enfr
  echo "Ein Hund rennt." | nmt-tf translate --run_dir=runs/multi30k_de_enfr --target_lang=fr
  nmt-tf evaluate --run_dir=runs/multi30k_de_enfr        # BLEU of each pair on test_2016

Each German source starts with the tag of its target language, "<2en>" or "<2fr>", a piece
of the source vocabulary of its own; the target vocabulary (8,000 pieces) serves both
languages. Validation scores both pairs' validation sentences together. Everything else is
the SentencePiece recipe (multi30k.py).
"""

from nmt_tf.configs import multi30k


def get_config(model="cgru"):
  config = multi30k.get_config(model)
  config.data.update(source_lang=None, target_lang=None, pairs="de-en,de-fr",
                     target_tags=True)
  return config
