"""nmt_tf.training."""
