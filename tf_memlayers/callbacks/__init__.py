"""TensorBoard callbacks that show what the memories do."""

from tf_memlayers.callbacks.heatmap import heatmap_image, matrix_markdown, write_heatmap

__all__ = ["heatmap_image", "matrix_markdown", "write_heatmap"]
