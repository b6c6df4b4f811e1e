"""Multi30k de-en as SentencePiece pieces and an OpenNMT-tf vocabulary for the OpenNMT-tf anchor.

Usage (with the OpenNMT-tf anchor venv's python):
  python bench/anchor/opennmt_tf/prepare.py [--anchor_dir DIR]
Makes DIR/data as the Joey NMT anchor's prepare.py does (the same plain text and the same
shared SentencePiece 8k model, so both anchors read the same pieces), then writes into
DIR/opennmt_tf/data each split's pieces, space-separated (`<split>.<lang>.sp`), and
vocab.onmt: OpenNMT-tf's special tokens `<blank> <s> </s>` first, then the pieces in id order
(the model's `<unk>` is OpenNMT-tf's own out-of-vocabulary id). Skips the work done unless
--force.
"""

import argparse
import os
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))
import common  # pylint: disable=wrong-import-position
import prepare as joey_prepare  # pylint: disable=wrong-import-position

SPECIALS = ("<unk>", "<pad>", "<s>", "</s>")


def write_pieces(text_dir, out_dir):
  """<split>.<lang>.sp: each sentence of text_dir as its SentencePiece pieces."""
  processor = spm.SentencePieceProcessor(model_file=os.path.join(text_dir, "spm.model"))
  for split in joey_prepare.SPLITS:
    for lang in joey_prepare.LANGS:
      with open(os.path.join(text_dir, f"{split}.{lang}"), encoding="utf-8") as f:
        lines = f.read().splitlines()
      pieces = processor.encode(lines, out_type=str)
      with open(os.path.join(out_dir, f"{split}.{lang}.sp"), "w", encoding="utf-8") as f:
        f.write("".join(" ".join(p) + "\n" for p in pieces))
  with open(os.path.join(out_dir, "vocab.onmt"), "w", encoding="utf-8") as f:
    tokens = ["<blank>", "<s>", "</s>"] + [
        processor.id_to_piece(i) for i in range(processor.get_piece_size())
        if processor.id_to_piece(i) not in SPECIALS]
    f.write("".join(t + "\n" for t in tokens))
  print(f"pieces and vocab.onmt ({len(tokens)} tokens) in {out_dir}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  common.add_dir_arguments(parser, multi30k=True)
  parser.add_argument("--force", action="store_true", help="Redo everything.")
  args = parser.parse_args()
  text_dir = os.path.join(args.anchor_dir, "data")
  out_dir = os.path.join(args.anchor_dir, "opennmt_tf", "data")
  if os.path.realpath(out_dir).startswith(os.path.realpath(ROOT) + os.sep):
    parser.error(f"{out_dir} is inside the project; choose an --anchor_dir outside it.")
  os.makedirs(text_dir, exist_ok=True)
  os.makedirs(out_dir, exist_ok=True)
  if args.force or not os.path.exists(os.path.join(text_dir, "test_2016_flickr.en")):
    joey_prepare.write_text(os.path.normpath(args.multi30k_dir), text_dir)
  if args.force or not os.path.exists(os.path.join(text_dir, "vocab.txt")):
    joey_prepare.train_spm(text_dir, 8000)
  if args.force or not os.path.exists(os.path.join(out_dir, "vocab.onmt")):
    write_pieces(text_dir, out_dir)
  print(f"data ready in {out_dir}")


if __name__ == "__main__":
  main()
