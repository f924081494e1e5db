"""Input pipelines: corpus readers, embedded generated defaults and `tf.data` builders."""
