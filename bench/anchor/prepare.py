"""Multi30k de-en plain text and a shared SentencePiece 8k model for the Joey NMT anchor.

Usage (with the anchor venv's python): python bench/anchor/prepare.py [--anchor_dir DIR]
Reads {train,val,test_2016_flickr}.{de,en}.gz from $NMT_TF_MULTI30K_DIR (default
<project>/../shared/data/multi30k) and writes into DIR/data (default $ANCHOR_DIR, else
<project>/../anchor): the plain text files, spm.model (one unigram model on train de + en,
character coverage 1.0, ids <unk>=0 <pad>=1 <s>=2 </s>=3 as Joey's default special
symbols) and vocab.txt (one piece per line, in id order: Joey's `voc_file`).
Skips the work already done unless --force.
"""

import argparse
import gzip
import os

import sentencepiece as spm

import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPLITS = ("train", "val", "test_2016_flickr")
LANGS = ("de", "en")


def write_text(src_dir, out_dir):
  """Unzips the Multi30k files into out_dir (one sentence per line, stripped)."""
  for split in SPLITS:
    for lang in LANGS:
      with gzip.open(os.path.join(src_dir, f"{split}.{lang}.gz"), "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f]
      with open(os.path.join(out_dir, f"{split}.{lang}"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
      print(f"{split}.{lang}: {len(lines)} sentences")


def train_spm(out_dir, vocab_size):
  """Trains spm.model on train.de + train.en and writes vocab.txt."""
  prefix = os.path.join(out_dir, "spm")
  spm.SentencePieceTrainer.train(
      input=",".join(os.path.join(out_dir, f"train.{lang}") for lang in LANGS),
      model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
      character_coverage=1.0, num_threads=2, minloglevel=2,
      unk_id=0, pad_id=1, bos_id=2, eos_id=3,
      unk_piece="<unk>", pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>",
      vocabulary_output_piece_score=False)
  os.replace(prefix + ".vocab", os.path.join(out_dir, "vocab.txt"))
  size = spm.SentencePieceProcessor(model_file=prefix + ".model").get_piece_size()
  print(f"spm.model, vocab.txt: {size} pieces")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  common.add_dir_arguments(parser, multi30k=True)
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--force", action="store_true", help="Redo everything.")
  args = parser.parse_args()
  out_dir = os.path.join(args.anchor_dir, "data")
  if os.path.realpath(out_dir).startswith(os.path.realpath(ROOT) + os.sep):
    parser.error(f"{out_dir} is inside the project; choose an --anchor_dir outside it.")
  os.makedirs(out_dir, exist_ok=True)
  if args.force or not os.path.exists(os.path.join(out_dir, "test_2016_flickr.en")):
    write_text(os.path.normpath(args.multi30k_dir), out_dir)
  if args.force or not os.path.exists(os.path.join(out_dir, "vocab.txt")):
    train_spm(out_dir, args.vocab_size)
  print(f"data ready in {out_dir}")


if __name__ == "__main__":
  main()
