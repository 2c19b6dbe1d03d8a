"""VisualCOMET TFDS builder (`visualcomet`) and its file readers."""
