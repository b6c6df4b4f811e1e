"""nmt_tf.decoding."""
