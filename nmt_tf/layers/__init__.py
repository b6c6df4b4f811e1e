"""nmt_tf.layers."""
