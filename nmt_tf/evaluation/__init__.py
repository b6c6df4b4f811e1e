"""nmt_tf.evaluation."""
