"""Caption generation with attention on the built-in shapes set: the captioning quick start.

  nmt-tf train --config=shapes:cgru --run_dir=runs/shapes
  nmt-tf caption --run_dir=runs/shapes --input_file=runs/shapes/shapes/images/test_00000.png

Each image shows two coloured shapes, and its captions name them and where one is from the
other ("a small red circle left of a large blue square", nmt_tf/data/shapes.py). The images
are written to RUN/shapes (or data.data_dir) at the first start. A convnet trained from
scratch turns each 48x48 image into a 6x6 grid of annotation vectors, over which the decoder
of the model preset attends (Xu et al. 2015). Hard attention trained with REINFORCE keeps up
with soft attention when it starts from 500 steps of it (docs/MODELS.md, "Caption
generation"); best with four samples per caption and the per-word reward (four times the time
per step):
  --config.model.attention_mode=hard --config.model.hard_expectation_rate=0.5
  --config.reinforce.start=500 --config.reinforce.samples=4
  --config.reinforce.reward=word --config.reinforce.weight=0.1
and within the spread between seeds at one sample, with Xu et al.'s estimate:
  --config.model.attention_mode=hard --config.model.hard_expectation_rate=0.5
  --config.reinforce.start=500 --config.reinforce.reward=word_mean
  --config.reinforce.weight=0.29 --config.reinforce.baseline_decay=0.9
For your own images and captions (Flickr8k or Flickr30k layout), set data.name="captions",
data.data_dir=<image folder> and data.train_tgt / valid_tgt / test_tgt (docs/DATA.md, "Images
and captions").
"""

from nmt_tf.experiment import base_config


def get_config(model="cgru"):
  config = base_config(model)
  # 3,000 images with two captions each; 200 validation and test images keep validations short.
  config.data.update(name="shapes", train_size=3000, valid_size=200, test_size=200)
  # About 20 words: a word vocabulary holds them all.
  config.tokenizer.update(kind="word", vocab_size=100)
  # 48x48 images, three convolution blocks: a 6x6 grid of 64-dimensional annotation vectors.
  config.model.update(encoder="image", image_size=48, encoder_layers=3, encoder_units=64,
                      embedding_dim=32, decoder_units=128)
  config.pipeline.update(batch_size=32, max_target_len=20, eval_batch_size=100)
  # The learning rate halves every 500 steps (docs/MODELS.md compares it with a constant
  # rate): the relations "left of", "above"... are the last to be learnt.
  config.train.update(steps=1500, learning_rate=0.002, schedule="exponential", decay_rate=0.5,
                      decay_steps=500, eval_every=250, checkpoint_every=250)
  config.decode.update(max_length=20, batch_size=100)
  return config
