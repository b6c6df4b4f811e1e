"""nmt_tf.data."""
